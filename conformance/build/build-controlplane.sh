#!/usr/bin/env bash
# Build the local control plane from the Go module proxy and cache it outside the clone.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler  (k8s.io/kubernetes, wrapper go.mod)
#   etcd                                                      (go.etcd.io/etcd/server/v3)
#   kwok                                                      (sigs.k8s.io/kwok/cmd/kwok)
#   helm                                                      (helm.sh/helm/v3/cmd/helm)
#
# Each component lands in $GPUCONF_CACHE/bin/<component>-<version>/ and is rebuilt only
# when missing. k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces every
# staging module with ./staging/...), so a throw-away wrapper module requires it and
# replaces each staging module with its v0.X.Y tag (see ../shared/research/controlplane.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env (the pins, also read by binaries.py)
source "$here/versions.env"

cache="${GPUCONF_CACHE:-$HOME/.cache/gpu-conformance}"
bin_root="$cache/bin"
work="$cache/build"
mkdir -p "$bin_root" "$work"

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is missing; install Go >= 1.26 (https://go.dev/doc/install) and re-run" >&2
  exit 2
fi

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# done_marker DIR: a component counts as built only when its marker exists, so an
# interrupted build is redone rather than trusted.
built() { [[ -f "$1/.complete" ]]; }

finish() {  # finish SRC_DIR DEST_DIR: publish atomically
  local src="$1" dest="$2"
  touch "$src/.complete"
  rm -rf "$dest"
  mv "$src" "$dest"
}

build_kubernetes() {
  local v="$KUBERNETES_VERSION" dest="$bin_root/kubernetes-$KUBERNETES_VERSION"
  if built "$dest"; then log "kubernetes $v: cached at $dest"; return; fi
  local minor="${v#v1.}"; minor="${minor%%.*}"
  local staging_v="v0.${v#v1.}"
  local mod="$work/kubernetes-$v"
  rm -rf "$mod" && mkdir -p "$mod" && cd "$mod"
  log "kubernetes $v: resolving modules (staging at $staging_v)"
  cat > go.mod <<MOD
module local/k8sbins

go 1.26.0

godebug default=go1.$(go env GOVERSION | sed -E 's/go1\.([0-9]+).*/\1/')
MOD
  cat > main.go <<'GO'
package main

func main() {}
GO
  # Every staging module listed in the tag's own go.mod, replaced by its published tag.
  local staging
  staging=$(curl -fsSL --retry 3 "$(go env GOPROXY | cut -d, -f1)/k8s.io/kubernetes/@v/$v.mod" \
    | awk '$2=="=>" && $3 ~ /^\.\/staging/ {print $1}')
  [[ -n "$staging" ]] || { echo "error: could not read the staging module list of k8s.io/kubernetes $v" >&2; exit 1; }
  local args=()
  for m in $staging; do args+=("-replace=$m=$m@$staging_v"); done
  go mod edit "${args[@]}"
  go get "k8s.io/kubernetes@$v" \
    "k8s.io/kubernetes/cmd/kube-apiserver@$v" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@$v" \
    "k8s.io/kubernetes/cmd/kube-scheduler@$v"
  local ld="-s -w"
  ld+=" -X k8s.io/component-base/version.gitVersion=$v"
  ld+=" -X k8s.io/component-base/version.gitMajor=1"
  ld+=" -X k8s.io/component-base/version.gitMinor=$minor"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/component-base/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$v"
  ld+=" -X k8s.io/client-go/pkg/version.gitMajor=1"
  ld+=" -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  log "kubernetes $v: compiling kube-apiserver, kube-controller-manager, kube-scheduler (slow on a cold cache)"
  local out="$mod/out"; mkdir -p "$out"
  go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags "$ld" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
  "$out/kube-apiserver" --version
  finish "$out" "$dest"
  rm -rf "$mod"
}

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

start=$(date +%s)
only="${1:-all}"
case "$only" in
  all|kubernetes) build_kubernetes ;;&
  all|etcd) build_simple etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 ;;&
  all|kwok) build_simple kwok "$KWOK_VERSION" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok ;;&
  all|helm) build_simple helm "$HELM_VERSION" helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm ;;&
  all|kubernetes|etcd|kwok|helm) ;;
  *) echo "usage: $0 [all|kubernetes|etcd|kwok|helm]" >&2; exit 2 ;;
esac
log "done in $(( $(date +%s) - start ))s; binaries under $bin_root"
