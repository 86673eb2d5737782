"""conformance/sim."""
