"""Stack suite: every layer of the NVIDIA GPU stack is present and healthy."""
