"""What the real node decides from a GPU host's layout, as the H200 machine showed it.

On that machine the driver's libraries are in /usr/local/nvidia and its device nodes in /dev:
the device plugin's own CDI spec came out empty there, and a workload image built from a venv's
Python lost the venv (CUDA's library finder looks in the venv's site-packages).
"""

from __future__ import annotations

from pathlib import Path

from conformance.node import lifecycle
from conformance.node.workload_image import image_entries


def test_a_driver_root_without_device_nodes_gets_the_runtimes_injection(tmp_path):
    """The H200 machine's /usr/local/nvidia has a dev/ folder, but no device nodes in it."""
    (tmp_path / "dev").mkdir()
    said: list[str] = []
    assert lifecycle.choose_injection(None, str(tmp_path), said.append) == "runtime"
    assert "has no dev/nvidiactl" in said[0]


def test_a_driver_root_with_device_nodes_and_the_mock_keep_cdi(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidiactl").write_text("")  # a stand-in for the character device
    assert lifecycle.choose_injection(None, str(tmp_path), print) == "cdi"
    assert lifecycle.choose_injection(None, None, print) == "cdi"  # the mock NVML's profile


def test_cdi_asked_for_on_a_split_layout_is_kept_with_a_warning(tmp_path):
    said: list[str] = []
    assert lifecycle.choose_injection("cdi", str(tmp_path), said.append) == "cdi"
    assert said and said[0].startswith("warning:") and "unresolvable CDI" in said[0]


def _venv(tmp_path: Path) -> dict:
    """A probe's findings for a venv whose base interpreter is tmp_path/base/bin/python3."""
    base, venv = tmp_path / "base", tmp_path / "venv"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3").write_text("")
    (venv / "lib" / "site-packages").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python3").symlink_to(base / "bin" / "python3")  # as `python -m venv` does
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\n")
    stdlib = base / "lib" / "python3"
    stdlib.mkdir(parents=True)
    return {"executable": str(venv / "bin" / "python3"), "prefix": str(venv),
            "base_prefix": str(base), "stdlib": str(stdlib), "platstdlib": str(stdlib),
            "site": [str(venv / "lib" / "site-packages")], "files": [], "loaded": [],
            "base_sites": [str(base / "lib" / "dist-packages")]}


def test_a_venvs_python_stays_a_venv_in_the_image(tmp_path, monkeypatch):
    from conformance.node import images
    monkeypatch.setattr(images, "glibc_entries", lambda _paths: [])
    monkeypatch.setattr(images, "busybox_entries", lambda _bb: [])
    doc = _venv(tmp_path)
    entries = {e.path: e for e in image_entries(doc, tmp_path / "busybox")}
    venv, base_exe = Path(doc["prefix"]), str(tmp_path / "base" / "bin" / "python3")
    assert str(venv / "pyvenv.cfg") in entries  # site.getsitepackages() names the venv's
    assert entries[str(venv / "bin" / "python3")].link == base_exe
    # and a plain `python3` of the base interpreter still finds the venv's packages
    pth = entries[f"{doc['base_sites'][0]}/gpuconf-workload-image.pth"]
    assert pth.data.decode().split() == doc["site"]


def test_a_module_outside_the_site_folders_is_found_by_the_venvs_python_too(tmp_path,
                                                                            monkeypatch):
    """The dry run's CuPy stand-in (on PYTHONPATH, in no site folder): the kernels' worker
    processes run sys.executable, the venv's python3, which reads only the venv's .pth files."""
    from conformance.node import images
    monkeypatch.setattr(images, "glibc_entries", lambda _paths: [])
    monkeypatch.setattr(images, "busybox_entries", lambda _bb: [])
    doc = _venv(tmp_path)
    stand_in = tmp_path / "fakes" / "cupy"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("")
    doc["module_dirs"] = [str(stand_in)]
    entries = {e.path: e for e in image_entries(doc, tmp_path / "busybox")}
    for site in (doc["base_sites"][0], doc["site"][0]):
        pth = entries[f"{site}/gpuconf-workload-image.pth"].data.decode().split()
        assert str(tmp_path / "fakes") in pth, site


def test_the_cuda_headers_cupy_compiles_against_go_into_the_image(tmp_path, monkeypatch):
    """On the H200 every kernel pod failed with "Failed to find CUDA headers": CuPy's NVRTC
    compiles against the nvidia-* wheels' include folder, which no import names."""
    from conformance.node import images
    monkeypatch.setattr(images, "glibc_entries", lambda _paths: [])
    monkeypatch.setattr(images, "busybox_entries", lambda _bb: [])
    doc = _venv(tmp_path)
    include = Path(doc["site"][0]) / "nvidia" / "cu13" / "include"
    (include / "crt").mkdir(parents=True)
    for name in ("cuda_runtime.h", "cuda_fp16.h", "crt/host_defines.h"):
        (include / name).write_text("/* header */")
    doc["header_dirs"] = [str(include)]
    paths = {e.path for e in image_entries(doc, tmp_path / "busybox")}
    assert {str(include / n) for n in ("cuda_runtime.h", "cuda_fp16.h",
                                       "crt/host_defines.h")} <= paths
