"""Pure checks: rules over what was read from a cluster, with no I/O of their own.

Each function takes plain data (GpuNode views, pod objects, label maps) and returns what is
wrong, as sentences a user can act on. The suites read the cluster through
``conformance.cluster`` and judge what they read with these rules.
"""
