"""Operations suite (disruptive, --disruptive): the operator reconciles changes as it should."""
