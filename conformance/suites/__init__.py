"""The suites: each file is the checklist of one part of a GPU cluster (a pytest module)."""
