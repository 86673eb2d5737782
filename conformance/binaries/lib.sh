# shellcheck shell=bash
# Sourced (not run) by build-controlplane.sh and build-node.sh: the pins, the cache layout, the
# rule that a component counts as built only once published whole, Go prerequisites, and the
# recipe that builds commands of k8s.io/kubernetes (the control plane's and the kubelet).
#
# The sourcing script sets BUILD_LOG_NAME (the tag of its log lines) first.

# shellcheck source=versions.env (the pins, also read by binaries.py)
source "$(dirname "${BASH_SOURCE[0]}")/versions.env"

cache="${GPUCONF_CACHE:-$HOME/.cache/gpu-conformance}"
bin_root="$cache/bin"
work="$cache/build"
mkdir -p "$bin_root" "$work"

log() { printf '[%s %s] %s\n' "${BUILD_LOG_NAME:-build}" "$(date +%H:%M:%S)" "$*"; }
die() { echo "error: $1" >&2; exit "${2:-1}"; }  # die MESSAGE [STATUS]

# built DEST [FILE...]: DEST was published whole (its marker exists), with every FILE. An
# interrupted build leaves no marker and is redone; a cache from before FILE was built is stale.
built() {
  local dest=$1 f; shift
  [[ -f "$dest/.complete" ]] || return 1
  for f in "$@"; do [[ -e "$dest/$f" ]] || return 1; done
}

finish() {  # finish SRC_DIR DEST_DIR: publish atomically
  local src="$1" dest="$2"
  touch "$src/.complete"
  rm -rf "$dest"
  mv "$src" "$dest"
}

need_go() { command -v go >/dev/null 2>&1 || die "the Go toolchain is missing: install Go >= 1.26 (https://go.dev/doc/install) and re-run" 2; }
need_cc() { command -v gcc >/dev/null 2>&1 || die "$1 needs cgo: install gcc (Debian: apt-get install gcc libc6-dev)" 2; }

module_dir() {  # module_dir MODULE@VERSION: the module's source in the module cache (downloaded)
  local dir
  dir=$(GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [[ -n "$dir" && -d "$dir" ]] || die "could not download $1 from the Go module proxy ($(go env GOPROXY))"
  echo "$dir"
}

# build_simple NAME VERSION MODULE PACKAGE: PACKAGE of MODULE@VERSION in a throw-away module
# (go get; the dependency versions its go.mod asks for), published as $bin_root/NAME-VERSION/NAME.
build_simple() {  # build_simple NAME VERSION MODULE PACKAGE
  local name="$1" v="$2" module="$3" pkg="$4" dest="$bin_root/$1-$2"
  if built "$dest"; then log "$name $v: cached at $dest"; return; fi
  local mod="$work/$name-$v"
  rm -rf "$mod" && mkdir -p "$mod" && cd "$mod"
  log "$name $v: resolving $module@$v"
  printf 'module local/%sbin\n\ngo 1.26.0\n' "$name" > go.mod
  printf 'package main\n\nfunc main() {}\n' > main.go
  go get "$module@$v"
  local out="$mod/out"; mkdir -p "$out"
  log "$name $v: compiling $pkg"
  go build -trimpath -ldflags "-s -w" -o "$out/$name" "$pkg"
  finish "$out" "$dest"
  rm -rf "$mod"
}

# build_kubernetes_commands NAME COMMAND...: k8s.io/kubernetes/cmd/COMMAND at KUBERNETES_VERSION,
# static and stripped, published as $bin_root/NAME-<version>/COMMAND.
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces every staging module with
# ./staging/...), so a throw-away wrapper module requires it and replaces each staging module with
# its published v0.X.Y tag (../shared/research/controlplane.md). The first COMMAND prints its
# version as the smoke test.
# KUBE_PATCH="FILE|PIN|REPLACEMENT" (optional): the line PIN of k8s.io/kubernetes' FILE is
# compiled as REPLACEMENT, from a copy of the module (the module cache stays as published; Go
# refuses an overlay there); the change is written to NAME-<version>/PATCH, and a build that
# does not record this very change is built again.
build_kubernetes_commands() {
  local name="$1"; shift
  local v="$KUBERNETES_VERSION" dest="$bin_root/$name-$KUBERNETES_VERSION" cmd
  local patch="${KUBE_PATCH:-}"
  if built "$dest" "$@" && [[ "$(cat "$dest/PATCH" 2>/dev/null)" == "$patch" ]]; then
    log "$name $v: cached at $dest"; return
  fi
  need_go
  local minor="${v#v1.}"; minor="${minor%%.*}"
  local staging_v="v0.${v#v1.}" mod="$work/$name-$v" gomod staging replaces=() packages=()
  for cmd in "$@"; do packages+=("k8s.io/kubernetes/cmd/$cmd"); done
  rm -rf "$mod" && mkdir -p "$mod" && cd "$mod"
  log "$name $v: resolving modules (staging at $staging_v)"
  printf 'module local/%sbin\n\ngo 1.26.0\n\ngodebug default=go1.%s\n' \
    "$name" "$(go env GOVERSION | sed -E 's/go1\.([0-9]+).*/\1/')" > go.mod
  printf 'package main\n\nfunc main() {}\n' > main.go
  # every staging module the tag's own go.mod lists, replaced by its published tag
  gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  [[ -n "$gomod" && -f "$gomod" ]] || die "could not download k8s.io/kubernetes $v from the Go module proxy ($(go env GOPROXY))"
  staging=$(awk '$2=="=>" && $3 ~ /^\.\/staging/ {print $1}' "$gomod")
  [[ -n "$staging" ]] || die "could not read the staging module list of k8s.io/kubernetes $v"
  for m in $staging; do replaces+=("-replace=$m=$m@$staging_v"); done
  go mod edit "${replaces[@]}"
  GOFLAGS=-mod=mod go get "k8s.io/kubernetes@$v" "${packages[@]/%/@$v}"
  local ld="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  done
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/component-base/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  log "$name $v: compiling $* (slow on a cold cache)"
  local out="$mod/out"
  mkdir -p "$out"
  if [[ -n "$patch" ]]; then
    local file="${patch%%|*}" rest="${patch#*|}"
    local pin="${rest%%|*}" replacement="${rest#*|}" src="$mod/kubernetes"
    cp -r "$(module_dir "k8s.io/kubernetes@$v")" "$src" && chmod -R u+w "$src"
    grep -qF "$pin" "$src/$file" || die "$name $v: $file no longer has the line this build changes ($pin): revisit KUBE_PATCH"
    awk -v pin="$pin" -v new="$replacement" 'index($0, pin) { print new; next } { print }' \
      "$src/$file" > "$mod/patched.go" && mv "$mod/patched.go" "$src/$file"
    go mod edit "-replace=k8s.io/kubernetes=$src"
    log "$name $v: $file: '$pin' compiled as '$replacement'"
  fi
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags "$ld" \
    -o "$out/" "${packages[@]}"
  "$out/$1" --version
  [[ -z "$patch" ]] || printf '%s' "$patch" > "$out/PATCH"
  finish "$out" "$dest"
  rm -rf "$mod"
}
