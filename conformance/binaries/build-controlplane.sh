#!/usr/bin/env bash
# Build the local control plane from the Go module proxy and cache it outside the clone.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler  (k8s.io/kubernetes, wrapper go.mod)
#   etcd                                                      (go.etcd.io/etcd/server/v3)
#   kwok                                                      (sigs.k8s.io/kwok/cmd/kwok)
#   helm                                                      (helm.sh/helm/v3/cmd/helm)
#
# Each component lands in $GPUCONF_CACHE/bin/<component>-<version>/ and is rebuilt only
# when missing; the Kubernetes commands with the wrapper-module recipe of lib.sh.
set -euo pipefail

BUILD_LOG_NAME=build
# shellcheck source=lib.sh (the pins, the cache, log/die/built/finish, build_kubernetes_commands)
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
need_go
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

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
  all|kubernetes) build_kubernetes_commands kubernetes kube-apiserver kube-controller-manager kube-scheduler ;;&
  all|etcd) build_simple etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 ;;&
  all|kwok) build_simple kwok "$KWOK_VERSION" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok ;;&
  all|helm) build_simple helm "$HELM_VERSION" helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm ;;&
  all|kubernetes|etcd|kwok|helm) ;;
  *) echo "usage: $0 [all|kubernetes|etcd|kwok|helm]" >&2; exit 2 ;;
esac
log "done in $(( $(date +%s) - start ))s; binaries under $bin_root"
