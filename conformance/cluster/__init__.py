"""conformance/cluster."""
