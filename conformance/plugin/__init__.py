"""The pytest plugin of gpu-conformance (entry point ``pytest11: gpu_conformance``).

- ``hooks``: the entry point; options (from ``conformance.options``), markers, requirement
  selection, outcomes and failure evidence on the test reports.
- ``recorder``: the session's :class:`Recorder`, registered as a plugin object the way
  pytest-xdist registers its session: it collects outcomes (from xdist workers too), sweeps
  the run's namespaces and writes ``results.json``.
- ``fixtures``: the fixtures the suites use (environment, cluster, namespace, GPU nodes, ...).
- ``api``: the few functions a suite calls (``finding``, ``not_applicable``,
  ``record_measurement``).
- ``results``: the results document (format ``gpuconf-results``).
"""
