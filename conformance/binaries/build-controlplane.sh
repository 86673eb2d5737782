#!/usr/bin/env bash
# Build the local control plane from the Go module proxy and cache it outside the clone.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler  (k8s.io/kubernetes, wrapper go.mod)
#   etcd                                                      (go.etcd.io/etcd/server/v3)
#   kwok                                                      (sigs.k8s.io/kwok/cmd/kwok)
#   helm                                                      (helm.sh/helm/v3/cmd/helm)
#   kueue, with its CRDs under crds/                          (sigs.k8s.io/kueue/cmd/kueue)
#   karpenter-kwok, with its CRDs under crds/                 (sigs.k8s.io/karpenter/kwok)
#   sonobuoy (the CLI, also its aggregator and worker)        (github.com/vmware-tanzu/sonobuoy)
#   custom-metrics-apiserver's test adapter (test-adapter)    (sigs.k8s.io/custom-metrics-apiserver)
#   kind (--target kind; opt-in: not in `all`)               (sigs.k8s.io/kind)
#
# Each component lands in $GPUCONF_CACHE/bin/<component>-<version>/ and is rebuilt only
# when missing; the Kubernetes commands with the wrapper-module recipe of lib.sh.
set -euo pipefail

BUILD_LOG_NAME=build
# shellcheck source=lib.sh (the pins, the cache, log/die/built/finish, build_kubernetes_commands)
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
need_go
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

# One upstream line is changed in kube-controller-manager: its namespace controller waits
# namespaceDeletionGracePeriod (5 s) after a namespace is deleted before it empties it, so that
# the other API servers of an HA control plane and the other etcd members see the deletion
# first (its comment says so). The local control plane has one API server and one etcd member:
# the wait guards nothing there, and every run that cleans up after itself (each `gpuconf run`
# waits until its namespaces are gone) waited it out: 5.5 s of a default sim run's 9.5 s.
NAMESPACE_GRACE_PATCH="pkg/controller/namespace/namespace_controller.go|namespaceDeletionGracePeriod = 5 * time.Second|	namespaceDeletionGracePeriod = 500 * time.Millisecond"

# build_patched_main NAME VERSION MODULE MAIN BINARY PIN REPLACEMENT: MODULE@VERSION's package
# main, the one file MAIN (importing only the module's packages), with its line PIN replaced by
# REPLACEMENT, compiled as $work/NAME-VERSION/out/BINARY (the current folder when it returns);
# the module's source is left in the caller's $src for the files it takes besides.
build_patched_main() {
  local name=$1 v=$2 module=$3 main=$4 binary=$5 pin=$6 replacement=$7
  rm -rf "$work/$name-$v" && mkdir -p "$work/$name-$v/out" && cd "$work/$name-$v"
  log "$name $v: resolving $module@$v"
  printf 'module local/%sbin\n\ngo 1.26.0\n' "${name//-/}" > go.mod
  src=$(module_dir "$module@$v")
  grep -qF "$pin" "$src/$main" || die "$name $v: $main no longer has the line this build changes ($pin): revisit build-controlplane.sh"
  sed "s|$pin|$replacement|" "$src/$main" > main.go
  go get "$module@$v"
  log "$name $v: compiling $module/$(dirname "$main") (slow on a cold cache)"
  go build -trimpath -ldflags "-s -w" -o "out/$binary" .
}

# build_kueue: Kueue's manager and the CRDs it needs (config/components/crd/bases of its module).
# One upstream line is changed: with internal cert management off (the sim serves Kueue's
# webhooks with certificates of its own CA), v0.17.0 reads its metrics certificate from the fixed
# path /etc/kueue/metrics/certs and exits when it is missing; the copy of cmd/kueue/main.go
# (a single file of package main, no internal imports) built here reads KUEUE_METRICS_CERT_DIR
# first, so a sim needs no root. Everything else is the module as published.
build_kueue() {
  local v="$KUEUE_VERSION" dest="$bin_root/kueue-$KUEUE_VERSION" src
  if built "$dest" kueue crds; then log "kueue $v: cached at $dest"; return; fi
  build_patched_main kueue "$v" sigs.k8s.io/kueue cmd/kueue/main.go kueue \
    'metricsCertPath := "/etc/kueue/metrics/certs"' \
    'metricsCertPath := os.Getenv("KUEUE_METRICS_CERT_DIR"); if metricsCertPath == "" { metricsCertPath = "/etc/kueue/metrics/certs" }'
  mkdir -p out/crds
  cp "$src"/config/components/crd/bases/*.yaml out/crds/
  chmod -R u+w out
  finish "$work/kueue-$v/out" "$dest"
  rm -rf "$work/kueue-$v"
}

# build_metrics_adapter: the test adapter of sigs.k8s.io/custom-metrics-apiserver, a real
# custom metrics API server (the library's own) whose metric values are written through its
# /write-metrics API; the sim's pod-autoscaling profile serves custom.metrics.k8s.io with it.
# One upstream line is changed: v1.37.0 serves /write-metrics on the fixed address ":8080" (every
# interface); the copy of test-adapter/main.go (package main, importing only the module's
# packages) built here reads TEST_ADAPTER_WRITE_ADDR first, so sims side by side each pick a port.
build_metrics_adapter() {
  local v="$CUSTOM_METRICS_APISERVER_VERSION" src
  local dest="$bin_root/custom-metrics-apiserver-$v"
  if built "$dest" test-adapter; then log "custom-metrics-apiserver $v: cached at $dest"; return; fi
  build_patched_main custom-metrics-apiserver "$v" sigs.k8s.io/custom-metrics-apiserver \
    test-adapter/main.go test-adapter 'Addr:              ":8080",' \
    'Addr: func() string { if a := os.Getenv("TEST_ADAPTER_WRITE_ADDR"); a != "" { return a }; return ":8080" }(),'
  finish "$work/custom-metrics-apiserver-$v/out" "$dest"
  rm -rf "$work/custom-metrics-apiserver-$v"
}

# build_karpenter: Karpenter's KWOK cloud provider (the module's kwok/ main package: Karpenter's
# controllers with a provider that creates Node objects for KWOK to play) and the CRDs it needs
# (kwok/charts/crds: NodePool, NodeClaim, NodeOverlay, CapacityBuffer; kwok/apis/crds:
# KWOKNodeClass). Built inside the module as published, with its own go.sum. v1.15.0's go.mod
# says `go 1.26.9`; GOTOOLCHAIN=local keeps the toolchain this machine has, so where that is an
# older 1.26 patch release the go line (only it) is lowered to it: patch releases do not change
# the language. The module cannot be downloaded to the module cache by an older toolchain (`go
# mod download` refuses it), so its zip, which it does fetch and verify, is unpacked here.
build_karpenter() {
  local v="$KARPENTER_VERSION" dest="$bin_root/karpenter-$KARPENTER_VERSION" zip src want have
  if built "$dest" karpenter-kwok crds; then log "karpenter $v: cached at $dest"; return; fi
  local mod="$work/karpenter-$v"
  rm -rf "$mod" && mkdir -p "$mod/out/crds" && cd "$mod"
  log "karpenter $v: downloading sigs.k8s.io/karpenter@$v"
  # (an older toolchain reports the go line as an error, and exits 1, after fetching the zip)
  zip=$( (go mod download -json "sigs.k8s.io/karpenter@$v" || true) | sed -n 's/^\t"Zip": "\(.*\)",$/\1/p')
  [[ -n "$zip" && -f "$zip" ]] || die "could not download sigs.k8s.io/karpenter $v from the Go module proxy ($(go env GOPROXY))"
  python3 -m zipfile -e "$zip" "$mod/src"
  src="$mod/src/sigs.k8s.io/karpenter@$v"
  chmod -R u+w "$src" && cd "$src"
  want=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod) have=$(go env GOVERSION | sed 's/^go//')
  if [[ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]]; then
    [[ "${want%.*}" == "${have%.*}" ]] || die "karpenter $v needs Go $want; this machine has Go $have: install Go ${want%.*}" 2
    log "karpenter $v: its go.mod says go $want, this toolchain is go $have: lowering the go line"
    go mod edit -go="$have"
  fi
  log "karpenter $v: compiling sigs.k8s.io/karpenter/kwok (slow on a cold cache)"
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$v" \
    -o "$mod/out/karpenter-kwok" ./kwok
  cp kwok/charts/crds/*.yaml kwok/apis/crds/*.yaml "$mod/out/crds/"
  finish "$mod/out" "$dest"
  cd "$work" && rm -rf "$mod"
}

# build_sonobuoy: the Sonobuoy CLI, built inside its own module (its go.mod and go.sum apply).
# One upstream line is changed: the aggregator advertises its pod IP as "[IP]:port", brackets
# that Go >= 1.26's net/url refuses around an IPv4 address ("invalid IP-literal"), so the
# plugin pod's worker could never reach it; the copy of pkg/config/loader.go built here
# brackets IPv6 addresses only (as RFC 3986 wants). Everything else is the module as published.
build_sonobuoy() {
  local v="$SONOBUOY_VERSION" dest="$bin_root/sonobuoy-$SONOBUOY_VERSION" src mod="$work/sonobuoy-$SONOBUOY_VERSION"
  local pin='fmt.Sprintf("[%v]:%d", ip, cfg.Aggregation.BindPort)'
  local fix='fmt.Sprintf(map[bool]string{true: "[%v]:%d", false: "%v:%d"}[strings.Contains(ip, ":")], ip, cfg.Aggregation.BindPort)'
  if built "$dest" sonobuoy; then log "sonobuoy $v: cached at $dest"; return; fi
  log "sonobuoy $v: resolving github.com/vmware-tanzu/sonobuoy@$v"
  src=$(module_dir "github.com/vmware-tanzu/sonobuoy@$v")
  grep -qF "$pin" "$src/pkg/config/loader.go" || die "sonobuoy $v: pkg/config/loader.go no longer has the line this build changes ($pin): revisit build_sonobuoy"
  rm -rf "$mod" && cp -r "$src" "$mod" && chmod -R u+w "$mod" && cd "$mod"
  local loader; loader=$(<pkg/config/loader.go)
  printf '%s\n' "${loader/"$pin"/"$fix"}" > pkg/config/loader.go  # quoted: a literal replace
  grep -qF "$fix" pkg/config/loader.go || die "sonobuoy $v: could not change pkg/config/loader.go"
  mkdir -p out
  log "sonobuoy $v: compiling github.com/vmware-tanzu/sonobuoy"
  go build -trimpath -ldflags "-s -w" -o out/sonobuoy .
  finish "$mod/out" "$dest"
  cd "$work" && rm -rf "$mod"
}

# build_kind: the kind CLI, inside its own module (its go.mod and go.sum apply), as upstream's
# `make build` does (static, stripped). Opt-in: only --target kind needs it.
build_kind() {
  local v="$KIND_VERSION" dest="$bin_root/kind-$KIND_VERSION" src mod="$work/kind-$KIND_VERSION"
  if built "$dest" kind; then log "kind $v: cached at $dest"; return; fi
  log "kind $v: resolving sigs.k8s.io/kind@$v"
  src=$(module_dir "sigs.k8s.io/kind@$v")
  rm -rf "$mod" && mkdir -p "$mod/out" && cd "$src"
  log "kind $v: compiling sigs.k8s.io/kind"
  go build -trimpath -ldflags "-s -w" -o "$mod/out/kind" .
  "$mod/out/kind" version
  finish "$mod/out" "$dest"
  cd "$work" && rm -rf "$mod"
}

start=$(date +%s)
only="${1:-all}"
case "$only" in
  all|kubernetes) KUBE_PATCH="$NAMESPACE_GRACE_PATCH" \
    build_kubernetes_commands kubernetes kube-apiserver kube-controller-manager kube-scheduler ;;&
  all|etcd) build_simple etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 ;;&
  all|kwok) build_simple kwok "$KWOK_VERSION" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok ;;&
  all|helm) build_simple helm "$HELM_VERSION" helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm ;;&
  all|kueue) build_kueue ;;&
  all|karpenter) build_karpenter ;;&
  all|sonobuoy) build_sonobuoy ;;&
  all|metrics-adapter) build_metrics_adapter ;;&
  kind) build_kind ;;&
  all|kubernetes|etcd|kwok|helm|kueue|karpenter|sonobuoy|metrics-adapter|kind) ;;
  *) echo "usage: $0 [all|kubernetes|etcd|kwok|helm|kueue|karpenter|sonobuoy|metrics-adapter|kind]" >&2; exit 2 ;;
esac
log "done in $(( $(date +%s) - start ))s; binaries under $bin_root"
