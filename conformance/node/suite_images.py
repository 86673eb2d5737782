"""The images that run the suites inside the node's cluster, brought onto the node without a
registry (``ctr images import``, pinned, as the node's own images):

- the suite's image (``make image``: ``deploy/image/Dockerfile`` built by
  ``ci/build-image.sh``, a docker-archive in the cache), which ``gpuconf job`` and the Sonobuoy
  plugin (``deploy/sonobuoy/gpuconf-plugin.yaml``) run;
- Sonobuoy's own image, the aggregator and the plugin pod's worker sidecar. Upstream's is the
  ``sonobuoy`` binary at ``/sonobuoy`` on a base image (its Dockerfile); this one is the binary
  ``build-controlplane.sh sonobuoy`` built (static: no base needed), under the reference
  ``sonobuoy run`` uses by default (``config.DefaultImage``), so no ``--sonobuoy-image`` flag.
"""

from __future__ import annotations

from pathlib import Path

from conformance import __version__
from conformance.binaries import binaries
from conformance.common.console import Progress
from conformance.common.errors import UsageError
from conformance.node import images, lifecycle

SONOBUOY_REPOSITORY = "docker.io/sonobuoy/sonobuoy"  # Sonobuoy's DefaultImage, normalised
# upstream's Dockerfile CMD (the aggregator pod sets its own command; the worker too)
SONOBUOY_CMD = ["/sonobuoy", "aggregator", "--no-exit", "-v", "3", "--logtostderr"]


def suite_archive() -> Path:
    """Where ``make image`` (ci/build-image.sh) writes the suite's docker-archive."""
    return binaries.cache_dir() / "images" / f"gpu-conformance-{__version__}.tar"


def import_suite_image(name: str, archive: Path | None = None, *,
                       progress: Progress = print) -> list[str]:
    """Import the suite's image archive into node ``name``; the references it holds."""
    archive = archive or suite_archive()
    if not archive.is_file():
        raise UsageError(f"no image archive at {archive}: run `make image` (ci/build-image.sh, "
                         "needs buildah), or pass --archive")
    return lifecycle.import_archive(name, archive, progress=progress)


def sonobuoy_image(binary: Path, version: str) -> images.Image:
    return images.Image([f"{SONOBUOY_REPOSITORY}:{version}"],
                        [images.Entry("/sonobuoy", source=binary)], cmd=SONOBUOY_CMD)


def import_sonobuoy_image(name: str, *, progress: Progress = print) -> str:
    """Make Sonobuoy's image from its binary and import it into node ``name``; its reference."""
    binary = binaries.require_sonobuoy()
    image = sonobuoy_image(binary, binaries.read_versions()["SONOBUOY_VERSION"])
    out = lifecycle.node_folder(name) / "sonobuoy-image.tar"
    images.write_archive([image], out)
    try:
        lifecycle.import_archive(name, out, progress=progress)
    finally:
        out.unlink(missing_ok=True)
    return image.refs[0]
