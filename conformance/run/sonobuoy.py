"""The suite as a Sonobuoy plugin: ``gpuconf sonobuoy-entrypoint``.

It runs the same suites as the Job's pod (``conformance.run.job``) inside a Sonobuoy plugin pod
and hands the evidence bundle to Sonobuoy by its contract: a tarball in
``SONOBUOY_RESULTS_DIR`` and its path in the ``done`` file.
"""

from __future__ import annotations

import os
from pathlib import Path
from xml.sax.saxutils import quoteattr

from conformance.common import interrupts
from conformance.common.console import Progress
from conformance.common.errors import UsageError
from conformance.common.redact import redact_text
from conformance.common.vocab import EXIT_OK
from conformance.options import Options
from conformance.run.job import run_suites, write_bundle
from conformance.run.results_store import pack

SONOBUOY_DIR_ENV = ("SONOBUOY_RESULTS_DIR", "RESULTS_DIR")  # the second: Sonobuoy's legacy name
SONOBUOY_TARBALL = "gpuconf-results.tar.gz"


def sonobuoy_results_dir() -> Path:
    for env in SONOBUOY_DIR_ENV:
        if os.environ.get(env):
            return Path(os.environ[env])
    raise UsageError("SONOBUOY_RESULTS_DIR is not set: `gpuconf sonobuoy-entrypoint` runs in a "
                     "Sonobuoy plugin pod (sonobuoy run --plugin deploy/sonobuoy/"
                     "gpuconf-plugin.yaml)")


def sonobuoy_entrypoint(options: Options, product_version: str | None,
                        progress: Progress) -> int:
    """Run the suites, then hand Sonobuoy the bundle: a tarball and its path in ``done``.

    The verdict travels in junit.xml (result-format junit), so this exits 0 once the ``done``
    file is written, as Sonobuoy plugins do; the ``done`` file is written in every case, or
    Sonobuoy would wait for it until its timeout.
    """
    out = sonobuoy_results_dir()
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "gpuconf-run"
    error = None
    try:
        code = run_suites(options, run_dir, progress)
        progress(f"suites finished (exit {code})")
    except UsageError as exc:
        error = redact_text(str(exc))
        progress(f"the run could not start: {error}")
    finally:
        with interrupts.deferred():
            bundle = write_bundle(run_dir, product_version, progress)
            if bundle is None:
                bundle = run_dir / "bundle"
                bundle.mkdir(parents=True, exist_ok=True)
                (bundle / "junit.xml").write_text(_error_junit(error or "the run left no "
                                                                         "results"))
            tarball = out / SONOBUOY_TARBALL
            tarball.write_bytes(pack(bundle))
            (out / "done").write_text(str(tarball))
            progress(f"results for Sonobuoy: {tarball} (named in {out / 'done'})")
    return EXIT_OK


def _error_junit(message: str) -> str:
    return ('<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="gpuconf" '
            'tests="1" errors="1" failures="0" skipped="0"><testcase classname="gpuconf" '
            f'name="gpuconf run"><error message={quoteattr(message)}/></testcase></testsuite>'
            "</testsuites>\n")
