#!/usr/bin/env bash
# Build deploy/image/Dockerfile, unchanged, without a Docker engine or a registry (`make image`):
#   1. a local base image: a debootstrap (minbase) Debian bookworm root with Debian's own
#      python3 + python3-venv, committed with buildah as BASE (built once, kept in buildah's
#      storage and as a tar under CACHE). It stands in for python:3.12.11-slim-bookworm: the
#      Python in it is Debian's (3.11 on bookworm), not python.org's 3.12.11;
#   2. `buildah bud --build-arg PYTHON_IMAGE=BASE` of the Dockerfile (its ARG is there for this);
#   3. smoke checks in a working container (`buildah run`, no engine): gpuconf --help, job render;
#   4. a docker-archive at CACHE/gpu-conformance-VERSION.tar, which `gpuconf node` can import
#      into a node's containerd (conformance/node/lifecycle.py: import_archive).
# Idempotent: a second run reuses the base and rebuilds only the image (buildah's layer cache);
# an archive built from the same inputs (a sha256 over the files the Dockerfile copies, as
# .dockerignore leaves them, in ARCHIVE.inputs) is current: nothing is built (--force builds).
#
# Usage: ci/build-image.sh [--rebuild-base] [--force] [--no-smoke] [--no-host-ca] [--out ARCHIVE]
# Needs root, buildah (apt-get install buildah) and debootstrap; the Debian mirror for the base.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: ci/build-image.sh [--rebuild-base] [--force] [--no-smoke] [--no-host-ca] [--out ARCHIVE]" >&2; exit 2; }

CACHE=${GPUCONF_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-conformance/images}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
BASE=localhost/gpuconf-base-debian-python3:$SUITE
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
IMAGE=localhost/gpu-conformance:$VERSION
OUT=$CACHE/gpu-conformance-$VERSION.tar
rebuild_base=0
force=0
smoke=1
host_ca=1
while (( $# )); do
  case $1 in
    --rebuild-base) rebuild_base=1; force=1 ;;
    --force) force=1 ;;
    --no-smoke) smoke=0 ;;
    --no-host-ca) host_ca=0 ;;
    --out) [[ $# -ge 2 && -n $2 ]] || usage; OUT=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ci/build-image.sh: unknown argument: $1" >&2; usage ;;
  esac
  shift
done
[[ -n $VERSION ]] || { echo "ci/build-image.sh: no version in pyproject.toml" >&2; exit 1; }

need() {  # need COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 \
    || { echo "ci/build-image.sh: $1 is missing: apt-get install -y $2 (as root), then make image" >&2
         exit 1; }
}
need buildah buildah

# What the image is built from: the Dockerfile, the files it copies (without the bytecode
# .dockerignore leaves out) and the CA choice; the same hash next to the archive = current.
inputs=$( { echo "host_ca=$host_ca"
            find deploy/image pyproject.toml README.md conformance gpu_kernels -type f \
              ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z \
              | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1)
if (( ! force )) && [[ -s $OUT && "$(cat "$OUT.inputs" 2>/dev/null)" == "$inputs" ]]; then
  echo "== current: $OUT (built from these inputs, sha256 $inputs; --force builds again)"
  exit 0
fi

# chroot isolation: the OCI runtime (crun) is refused on this project's machine ("cgroups in
# hybrid mode not supported"). Storage: buildah's default (overlay, which works here);
# STORAGE_DRIVER=vfs where overlay mounts are refused: passed as --storage-driver (that variable
# in the environment left buildah 1.28 on overlay here); one graph root holds one driver's images.
export BUILDAH_ISOLATION=${BUILDAH_ISOLATION:-chroot}
buildah() { command buildah ${STORAGE_DRIVER:+--storage-driver "$STORAGE_DRIVER"} "$@"; }
mkdir -p "$CACHE"
step() { echo "== $*"; }
t_start=$(date +%s)

# -- 1. the base image --------------------------------------------------------------------
base_tar=$CACHE/base-debian-$SUITE-python3.tar
if (( rebuild_base )); then
  buildah rmi -f "$BASE" >/dev/null 2>&1 || true
  rm -f "$base_tar"
fi
commit_base() {  # the root's tar as image BASE (buildah 1.28 has no `import`)
  local ctr
  ctr=$(buildah from scratch)
  buildah add "$ctr" "$base_tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 \
    --label org.opencontainers.image.description="Debian $SUITE minbase + Debian's python3 (local stand-in for python:3.12.11-slim-bookworm)" \
    "$ctr"
  buildah commit -q "$ctr" "$BASE" >/dev/null
  buildah rm "$ctr" >/dev/null
}
if buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  step "base $BASE: in buildah's storage"
elif [[ -s $base_tar ]]; then
  step "base $BASE: importing the cached root $base_tar"
  commit_base
else
  need debootstrap debootstrap
  t0=$(date +%s)
  root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  step "base $BASE: debootstrap --variant=minbase $SUITE from $MIRROR (a minute or two)"
  # python3-venv brings ensurepip (install.sh: python3 -m venv, then pip install); ca-certificates
  # for pip's HTTPS to PyPI
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    "$SUITE" "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { echo "ci/build-image.sh: debootstrap failed: see $CACHE/debootstrap.log" >&2; exit 1; }
  # A host behind an intercepting proxy trusts it through CAs added under
  # /usr/local/share/ca-certificates: the base trusts them too, or pip cannot reach PyPI
  # (--no-host-ca: leave them out; they end up in the final image, whose base this is).
  if (( host_ca )) && compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    step "base: adding the host's CAs: $(cd /usr/local/share/ca-certificates && echo *.crt)"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1
  fi
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
  step "base: packing the root ($(du -sh "$root" | cut -f1))"
  tar -C "$root" --numeric-owner -cf "$base_tar.partial" .
  mv "$base_tar.partial" "$base_tar"
  rm -rf "$root"; trap - EXIT
  commit_base
  ctr=$(buildah from -q "$BASE")
  step "base built in $(( $(date +%s) - t0 ))s: Debian's $(buildah run "$ctr" python3 --version 2>&1 | tail -1)"
  buildah rm "$ctr" >/dev/null
fi

# -- 2. the image --------------------------------------------------------------------------
step "image $IMAGE: buildah bud -f deploy/image/Dockerfile --build-arg PYTHON_IMAGE=$BASE"
t0=$(date +%s)
previous=$(buildah images -q --no-trunc "$IMAGE" 2>/dev/null || true)
buildah bud --layers -f deploy/image/Dockerfile --build-arg "PYTHON_IMAGE=$BASE" \
  -t "$IMAGE" . 2>&1 | sed 's/^/   /'
step "image built in $(( $(date +%s) - t0 ))s"
# the image this one replaced (untagged now): removed, not left to pile up (the build stage's
# layers stay: buildah's cache for the next run)
if [[ -n $previous && $previous != "$(buildah images -q --no-trunc "$IMAGE")" ]]; then
  buildah rmi "$previous" >/dev/null 2>&1 || true
fi

# -- 3. smoke checks -----------------------------------------------------------------------
if (( smoke )); then
  ctr=$(buildah from -q "$IMAGE")
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  step "smoke: gpuconf --help; gpuconf job render --name x (in a buildah container, as 65532)"
  buildah run "$ctr" gpuconf --help >/dev/null
  buildah run "$ctr" gpuconf job render --name x | grep -q "kind: Job" \
    || { echo "ci/build-image.sh: gpuconf job render printed no Job" >&2; exit 1; }
  buildah rm "$ctr" >/dev/null; trap - EXIT
fi

# -- 4. the archive ------------------------------------------------------------------------
step "archive: $OUT (docker-archive: docker.io/library/${IMAGE#localhost/} and $IMAGE)"
mkdir -p "$(dirname "$OUT")"
rm -f "$OUT.partial"
buildah push -q "$IMAGE" "docker-archive:$OUT.partial:${IMAGE#localhost/}" >/dev/null
mv "$OUT.partial" "$OUT"
echo "$inputs" > "$OUT.inputs"
size=$(buildah images --format '{{.Size}}' "$IMAGE" | head -1)
step "done in $(( $(date +%s) - t_start ))s: $IMAGE ($size), archive $(du -h "$OUT" | cut -f1)"
echo "a node imports it with conformance.node.lifecycle.import_archive (ctr -n k8s.io images import, pinned)"
