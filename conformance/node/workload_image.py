"""The gpu_kernels workload image without a registry: built from a Python on this host that
has CuPy (a GPU host's), imported into the node's containerd.

For air-gapped GPU hosts, where ``cupy/cupy`` cannot be pulled. The image holds that Python
(interpreter, its shared libraries, the standard library) and the packages the kernels need
(CuPy and what it requires, NumPy), at the same paths as on the host, plus every shared
library those loaded while a probe ran CuPy once (a compiled kernel, a GEMM through cuBLAS):
the CUDA runtime, NVRTC and cuBLAS of the host's install, found by what was loaded rather than
by guessing. The driver's libraries (libcuda, libnvidia-*) are never in it: CDI injects them.
gpu_kernels itself is not in it either: the suites mount it from a ConfigMap as they do into
``cupy/cupy``. Pods run it restricted (non-root, no hostPath): the image needs nothing else.

    gpuconf node workload-image [--python python3] [--tag IMAGE] [--output FILE]

prints the image reference; run the suites with ``--workload-image REF --cuda-image REF``
(the CDI spec mounts ``nvidia-smi`` from the driver into any image).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from conformance.binaries import binaries
from conformance.common.errors import UsageError
from conformance.node import images
from conformance.node.images import Entry, Image

REPOSITORY = "gpuconf.local/gpu-kernels"
PROBE_TIMEOUT_S = 300.0  # the first CuPy kernel compiles (NVRTC) and loads cuBLAS: seconds
DRIVER_LIBS = ("libcuda.so", "libnvidia-", "libcudadebugger.so", "libnvcuvid.so")
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "__pycache__",
               "site-packages", "dist-packages", "config-3"}

# Run by the host's Python: what it is, which distributions the modules need, and (with a GPU)
# which shared libraries a kernel, a GEMM and NVML loaded. One JSON document on stdout.
PROBE = r'''
import importlib, importlib.metadata as md, json, re, sys, sysconfig
modules = sys.argv[1].split(",")
out = {"executable": sys.executable, "version": sys.version.split()[0],
       "prefix": sys.prefix, "base_prefix": sys.base_prefix,
       "stdlib": sysconfig.get_paths()["stdlib"],
       "platstdlib": sysconfig.get_paths()["platstdlib"], "errors": [], "versions": {},
       "site": [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))],
       "base_site": sysconfig.get_paths(vars={"base": sys.base_prefix,
                                              "platbase": sys.base_prefix})["purelib"]}
# the site dirs the real interpreter (the one pods run, not a venv's) processes .pth files in
import subprocess
real = getattr(sys, "_base_executable", sys.executable)
try:
    out["base_sites"] = json.loads(subprocess.run(
        [real, "-I", "-c", "import json, site; print(json.dumps(site.getsitepackages()))"],
        capture_output=True, text=True, timeout=60).stdout)
except Exception:
    out["base_sites"] = []
out["module_dirs"] = []
for m in modules:
    try:
        mod = importlib.import_module(m)
        out["module_dirs"] += list(getattr(mod, "__path__", []))
    except Exception as exc:
        out["errors"].append(f"import {m}: {exc}")
if "cupy" in modules and not out["errors"]:
    import cupy
    out["versions"]["cupy"] = cupy.__version__
    try:
        k = cupy.RawKernel(r'extern "C" __global__ void f(float* x){x[threadIdx.x]*=2.0f;}', "f")
        x = cupy.ones(32, dtype=cupy.float32); k((1,), (32,), (x,))
        for dt in (cupy.float32, cupy.float16):
            a = cupy.ones((256, 256), dtype=dt); (a @ a).sum()
        cupy.random.random(16).sum()
        cupy.cuda.Device(0).synchronize()
        out["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as exc:
        out["gpu_error"] = str(exc).splitlines()[0][:300]
# CuPy compiles its kernels with NVRTC at run time, against the CUDA headers it finds: the
# CUDA_PATH (or /usr/local/cuda) toolkit or the nvidia-* wheels' include folders (the [ctk]
# extra; CUDA's path finder). None of them is a module import: name them, they go in whole.
import glob, os
headers = []
try:
    from cuda import pathfinder
    for name in ("cudart", "nvrtc", "cccl"):
        try:
            headers.append(pathfinder.find_nvidia_header_directory(name))
        except Exception:
            pass
except Exception:
    pass
try:
    from cupy import _environment
    cuda_path = _environment.get_cuda_path()
    if cuda_path:
        headers.append(os.path.join(cuda_path, "include"))
except Exception:
    pass
for site_dir in out["site"]:
    for header in ("cuda_runtime.h", "cuda_fp16.h"):
        headers += [os.path.dirname(h) for h in glob.glob(f"{site_dir}/nvidia/*/include/{header}")]
out["header_dirs"] = sorted({os.path.abspath(h) for h in headers
                             if h and os.path.isfile(os.path.join(h, "cuda_runtime.h"))})
out["cuda_path_env"] = os.environ.get("CUDA_PATH")
libs = set()
for line in open("/proc/self/maps"):
    path = line.split()[-1] if len(line.split()) >= 6 else ""
    if re.search(r"\.so(\.|$)", path):
        libs.add(path)
out["loaded"] = sorted(libs)
def closure(names):
    seen, todo, dists = set(), list(names), []
    while todo:
        name = re.split(r"[ ;<>=!~\[(]", todo.pop())[0].lower().replace("_", "-")
        if not name or name in seen:
            continue
        seen.add(name)
        try:
            d = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        dists.append(d)
        todo += [r for r in d.requires or [] if "extra ==" not in r]
    return dists
roots = [n for n in ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy") if "cupy" in modules]
# what the run imported beyond the declared requirements (CuPy imports ml_dtypes and
# cuda.pathfinder when present): their distributions too
owners = md.packages_distributions()
imported = sorted({d for m in list(sys.modules) for d in owners.get(m.split(".")[0], [])})
files = []
for d in closure(roots + [m for m in modules if m != "cupy"] + imported):
    out["versions"][d.metadata["Name"]] = d.version
    for f in d.files or []:
        files.append(str(f.locate()))
out["files"] = files
print(json.dumps(out))
'''


def probe(python: str, modules: tuple[str, ...], env: dict | None = None) -> dict:
    """What ``python`` is and needs (see PROBE); one-line errors."""
    try:
        proc = subprocess.run([python, "-c", PROBE, ",".join(modules)], capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S, check=False,
                              env=None if env is None else {**os.environ, **env})
    except FileNotFoundError as exc:
        raise UsageError(f"--python {python}: no such program") from exc
    except subprocess.TimeoutExpired as exc:
        raise UsageError(f"--python {python}: probing CuPy took over {PROBE_TIMEOUT_S:.0f}s"
                         ) from exc
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"--python {python} does not run the probe: {last}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    if doc["errors"]:
        raise UsageError(f"--python {python}: {doc['errors'][0]} (the image needs "
                         f"{', '.join(modules)} in that Python; e.g. pip install cupy-cuda13x)")
    return doc


def _driver_lib(path: str) -> bool:
    return any(Path(path).name.startswith(p) for p in DRIVER_LIBS)


def _stdlib_files(root: Path) -> list[Path]:
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if any(part in STDLIB_SKIP or part.startswith("config-") for part in rel[:-1]):
            continue
        if path.is_file() and not path.is_symlink() and path.suffix not in (".pyc", ".a"):
            out.append(path)
    return out


def _is_library(path: str) -> bool:
    name = Path(path).name
    return ".so" in name and not name.endswith(".py")


def _venv_prefix(doc: dict) -> Path | None:
    """The venv the probed Python runs in, if it is one."""
    prefix, base = doc.get("prefix"), doc.get("base_prefix")
    return Path(prefix) if prefix and base and prefix != base else None


def image_entries(doc: dict, busybox: Path) -> list[Entry]:
    """The files of the image: the interpreter and its libraries, the standard library, the
    distributions' Python files and extension modules, the shared libraries loaded by the
    probe (not the driver's) and what those need."""
    exe = Path(doc["executable"])
    real_exe = exe.resolve()
    wanted: dict[str, Path] = {str(real_exe): real_exe}
    for root in {Path(doc["stdlib"]), Path(doc["platstdlib"])}:
        for f in _stdlib_files(root):
            wanted[str(f)] = f
    loaded = {p for p in doc.get("loaded", []) if Path(p).is_file() and not _driver_lib(p)}
    # the modules asked for, whole (a package installed without a distribution record too)
    files = [*doc["files"], *(str(f) for d in doc.get("module_dirs", [])
                              for f in Path(d).rglob("*") if "__pycache__" not in f.parts)]
    for f in files:
        p = Path(f)
        if not p.is_file() or p.suffix == ".pyc":
            continue
        # a distribution's shared libraries: its Python extension modules always (imported
        # lazily), other libraries (CUDA's, in nvidia-* wheels) only when the probe loaded them
        if _is_library(f) and not (".cpython-" in p.name or ".abi3." in p.name) and \
                str(p) not in loaded and str(p.resolve()) not in loaded:
            continue
        wanted[str(p)] = p.resolve()
    for lib in loaded:
        wanted.setdefault(lib, Path(lib).resolve())
    for header_dir in doc.get("header_dirs", []):  # what NVRTC compiles CuPy's kernels against
        for f in Path(header_dir).rglob("*"):
            if f.is_file():
                wanted.setdefault(str(f), f.resolve())
    dynamic = [real_exe, *(p for p in wanted.values() if _is_library(str(p)))]
    for entry in images.glibc_entries(dynamic):
        if not _driver_lib(entry.path):
            wanted.setdefault(entry.path, entry.source)
    venv = _venv_prefix(doc)
    if venv is not None and (venv / "pyvenv.cfg").is_file():
        wanted[str(venv / "pyvenv.cfg")] = venv / "pyvenv.cfg"
    entries = [Entry(path, source=src, mode=0o755 if _is_library(path) or src == real_exe
                     else 0o644) for path, src in sorted(wanted.items())]
    # A venv stays a venv: its interpreter (a link to the real one) beside its pyvenv.cfg, so
    # site.getsitepackages() names its site-packages, where CUDA's library finder
    # (cuda.pathfinder) looks for the nvidia-* wheels' libraries.
    if venv is not None:
        for name in {exe.name, "python3", "python"}:
            link = venv / "bin" / name
            if link != real_exe:
                entries.append(Entry(str(link), link=str(real_exe)))
    # A venv's (or user) site-packages are found through pyvenv.cfg beside the venv's own
    # executable; pods run the real one: a .pth in its own site-packages names them instead.
    found_on = [str(Path(d).parent) for d in doc.get("module_dirs", [])]
    # (Debian's python3 reads .pth files in dist-packages, not in the site-packages a venv's
    # sysconfig names: the real interpreter's own site dirs, as it reported them, take it)
    bases = doc.get("base_sites") or [doc.get("base_site")]
    extra = [p for p in dict.fromkeys([*doc.get("site", []), *found_on])
             if p not in (*bases, doc["stdlib"], doc["platstdlib"])]
    # and in the venv's own site-packages too: a pod whose PATH finds the venv's python3
    # (sys.executable, which the kernels' worker processes run) reads only that one
    for base in dict.fromkeys([*bases, *doc.get("site", [])]) if extra else []:
        if base:
            entries.append(Entry(f"{base}/gpuconf-workload-image.pth",
                                 data="".join(f"{p}\n" for p in extra).encode(), mode=0o644))
    # a shell for the suites' scripts (``sh -c "nvidia-smi -L ..."``): the node's static busybox
    entries += images.busybox_entries(busybox)
    for name in {exe.name, "python3", "python"}:  # the names pods run it by
        link = f"/usr/bin/{name}"
        if link != str(real_exe):
            entries.append(Entry(link, link=str(real_exe)))
    return entries


def workload_image(python: str = "python3", *, tag: str | None = None,
                   modules: tuple[str, ...] = ("cupy", "numpy"), env: dict | None = None,
                   require_gpu: bool = True) -> tuple[Image, dict]:
    """The image and the probe's findings. ``env``: the probe's environment (a test puts a
    CPU stand-in of CuPy on PYTHONPATH there, with ``require_gpu=False``)."""
    doc = probe(python, modules, env)
    if "cupy" in modules and doc.get("gpu_error") and require_gpu:
        raise UsageError(f"--python {python}: CuPy imports but does not run a kernel here "
                         f"({doc['gpu_error']}): build the image on the GPU host")
    version = doc["versions"].get("cupy")
    ref = tag or f"{REPOSITORY}:py{doc['version']}" + (f"-cupy{version}" if version else "")
    busybox = binaries.locate_node().busybox
    if not busybox.is_file():
        raise UsageError(f"busybox missing under {binaries.cache_dir() / 'bin'}: run "
                         "`make setup` (the image's shell)")
    # CDI mounts the driver's binaries (nvidia-smi) where the driver root has them
    venv = _venv_prefix(doc)
    path = (f"{venv / 'bin'}:" if venv else "") + f"{images.PATH_ENV}:/usr/local/nvidia/bin"
    return Image([ref], image_entries(doc, busybox), cmd=[str(Path(doc["executable"]))],
                 env={"PATH": path, "PYTHONDONTWRITEBYTECODE": "1",
                      "CUPY_CACHE_DIR": "/tmp/cupy-cache", "HOME": "/tmp",
                      # the toolkit the host's CuPy was pointed at, at the same path in the image
                      **({"CUDA_PATH": doc["cuda_path_env"]} if doc.get("cuda_path_env") else {})
                      }), doc


def build_and_import(name: str, *, python: str = "python3", tag: str | None = None,
                     archive: str | None = None, modules: tuple[str, ...] = ("cupy", "numpy"),
                     require_gpu: bool = True, progress: Callable[[str], None] = print) -> str:
    """Build the image (see the module docstring), import it into node ``name``; its ref."""
    from conformance.node import lifecycle

    lifecycle.require_up(name)
    t0 = time.monotonic()
    progress(f"probing {python} ({', '.join(modules)}; a first CuPy kernel and GEMM)")
    image, doc = workload_image(python, tag=tag, modules=modules, require_gpu=require_gpu)
    size = sum(e.source.stat().st_size for e in image.entries if e.source is not None)
    progress(f"{image.refs[0]}: Python {doc['version']}, {len(image.entries)} files, "
             f"{size >> 20} MiB" + (f", probed on {doc['gpu']}" if doc.get("gpu") else ""))
    out = Path(archive) if archive else lifecycle.node_folder(name) / "workload-image.tar"
    images.write_archive([image], out)
    progress(f"wrote {out} ({out.stat().st_size >> 20} MiB) in {time.monotonic() - t0:.0f}s")
    lifecycle.import_archive(name, out, progress=progress)
    if not archive:
        out.unlink(missing_ok=True)
    return image.refs[0]


def stdlib_image(ref: str, busybox: Path) -> Image:
    """An image of this host's Python with its standard library only (no packages): what a
    dependency-free stand-in (``python3 -c SCRIPT``) needs, under ``ref``."""
    base = getattr(sys, "_base_executable", sys.executable)  # the interpreter, not a venv's
    doc = probe(base, ("http",))
    return Image([ref], image_entries(doc, busybox), cmd=["python3"],
                 env={"PATH": images.PATH_ENV, "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp"})
