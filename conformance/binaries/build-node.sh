#!/usr/bin/env bash
# Build the real node's binaries and cache them outside the clone, next to the control plane's.
#
#   kubelet                                   k8s.io/kubernetes (wrapper go.mod, KUBERNETES_VERSION)
#   containerd, containerd-shim-runc-v2, ctr  github.com/containerd/containerd/v2
#   runc                                      github.com/opencontainers/runc (cgo + static libseccomp)
#   bridge, host-local, loopback              github.com/containernetworking/plugins
#   nvidia-ctk, nvidia-container-runtime      github.com/NVIDIA/nvidia-container-toolkit (cgo)
#   nfd-master, nfd-worker                    sigs.k8s.io/node-feature-discovery
#   nvidia-device-plugin, gpu-feature-discovery, config-manager, mps-control-daemon
#                                             NVIDIA k8s-device-plugin source (--nvidia-src)
#   libnvidia-ml.so (mock NVML) + GPU configs NVIDIA k8s-test-infra source (--nvidia-src)
#   busybox                                   this host's static busybox (Debian busybox-static):
#                                             base of the pause and workload images
#   prometheus                                github.com/prometheus/prometheus (its Kubernetes
#                                             service discovery only): the node's monitoring system
#   traefik + crds/                           github.com/traefik/traefik/v3 (its kubernetesGateway
#                                             provider) and the Gateway API CRDs
#                                             (sigs.k8s.io/gateway-api GATEWAY_API_VERSION,
#                                             config/crd/standard): the node's Gateway
#   gpu-operator, nvidia-validator, cleanup-gpuclusters + assets/, manifests/,
#   validator-manifests/                      NVIDIA gpu-operator source (--nvidia-src); opt-in:
#                                             not in `all` (`gpuconf node operator` needs it)
#
#   build-node.sh [--nvidia-src DIR] [all|COMPONENT...]
#
# Each component lands in $GPUCONF_CACHE/bin/<component>-<version>/ and is rebuilt only when
# missing. Modules the Go proxy serves are built inside their own module (their go.mod, go.sum
# and replace directives apply, as in an upstream checkout). NVIDIA's device plugin and mock NVML
# are not served by every proxy: they come from DIR (NVIDIA_SRC), which holds the upstream source
# of the pinned tag (a GitHub archive, unpacked or not) and vendors its dependencies (-mod=vendor).
# Binaries are stripped (-s -w); those that run in containers without glibc are static.
# Exit status: 0 all built, 1 a build failed, 2 a prerequisite is missing (each named on stderr).
set -euo pipefail

BUILD_LOG_NAME=build-node
# shellcheck source=lib.sh (the pins, the cache, log/die/built/finish, need_go/need_cc, module_dir)
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
COMPONENTS=(kubelet containerd runc cni toolkit nfd device-plugin mock-nvml busybox prometheus traefik)
OPTIONAL=(gpu-operator)  # built only when named

export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false"

# nvidia_src NAME VERSION MODULE_LINE SUBDIR URL: an unpacked source tree of NAME at VERSION whose
# go.mod declares MODULE_LINE, from $NVIDIA_SRC (a folder, a .tar.gz/.tar.xz archive in it, or the
# checkout itself). SUBDIR must exist in the tree. Prints the tree's root.
nvidia_src() {
  local name="$1" v="$2" module="$3" subdir="$4" url="$5" src="${NVIDIA_SRC:-}" c f root=""
  local hint="download $url and pass its folder with --nvidia-src (or NVIDIA_SRC)"
  [[ -n "$src" ]] || die "$name $v source not set: $hint" 2
  [[ -d "$src" ]] || die "$name $v source folder '$src' does not exist: $hint" 2
  is_tree() { [[ -f "$1/go.mod" ]] && grep -qx "module $module" "$1/go.mod" && [[ -d "$1/$subdir" ]]; }
  for c in "$src" "$src/$name-$v" "$src/$name-${v#v}" "$src/$name"; do
    if is_tree "$c"; then root="$c"; break; fi
  done
  if [[ -z "$root" ]]; then
    for f in "$src/$name-$v-src.tar.xz" "$src/$name-$v"*.tar.* "$src/$name-${v#v}.tar.gz" "$src/$v.tar.gz"; do
      [[ -f "$f" ]] || continue
      local dest="$work/src/$name-$v"
      if [[ ! -f "$dest/.unpacked" ]]; then
        rm -rf "$dest" && mkdir -p "$dest"
        tar -xf "$f" -C "$dest" || die "could not unpack $f"
        touch "$dest/.unpacked"
      fi
      for c in "$dest" "$dest"/*/; do
        c="${c%/}"; if is_tree "$c"; then root="$c"; break 2; fi
      done
    done
  fi
  [[ -n "$root" ]] || die "$name $v source not found in '$src': $hint" 2
  [[ -d "$root/vendor" ]] || die "$name $v source in $root has no vendor/ folder (the upstream tag vendors its dependencies): $hint" 2
  echo "$root"
}

# ---- modules the proxy serves: built in their own module directory ----
build_containerd() {
  local v="$CONTAINERD_VERSION" dest="$bin_root/containerd-$CONTAINERD_VERSION"
  if built "$dest"; then log "containerd $v: cached at $dest"; return; fi
  need_go
  local dir out="$work/containerd-$v/out"; dir=$(module_dir "github.com/containerd/containerd/v2@$v")
  rm -rf "$out" && mkdir -p "$out" && cd "$dir"
  local ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$v"
  ld+=" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
  local tags="no_btrfs no_devmapper no_zfs urfave_cli_no_docs osusergo netgo static_build"
  log "containerd $v: compiling containerd, ctr, containerd-shim-runc-v2 (static)"
  CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "$ld" -o "$out/" ./cmd/containerd ./cmd/ctr
  CGO_ENABLED=0 go build -trimpath -tags "$tags no_grpc" -ldflags "$ld" \
    -o "$out/containerd-shim-runc-v2" ./cmd/containerd-shim-runc-v2
  "$out/containerd" --version
  finish "$out" "$dest"
  rm -rf "$work/containerd-$v"
}

build_runc() {
  local v="$RUNC_VERSION" dest="$bin_root/runc-$RUNC_VERSION"
  if built "$dest"; then log "runc $v: cached at $dest"; return; fi
  need_go; need_cc "runc (seccomp)"
  # seccomp is linked statically: the static archive comes with Debian's libseccomp-dev
  local seccomp_a
  seccomp_a=$(gcc -print-file-name=libseccomp.a)
  [[ "$seccomp_a" == /* && -f "$seccomp_a" ]] || \
    die "runc needs the static libseccomp: install libseccomp-dev (Debian/Ubuntu) or libseccomp-static" 2
  local dir out="$work/runc-$v/out"; dir=$(module_dir "github.com/opencontainers/runc@$v")
  rm -rf "$out" && mkdir -p "$out" && cd "$dir"
  log "runc $v: compiling (cgo, seccomp, static)"
  CGO_ENABLED=1 go build -trimpath -buildmode=pie -tags "seccomp netgo osusergo" \
    -ldflags "-s -w -X main.gitCommit=$v -linkmode external -extldflags -static-pie" -o "$out/runc" .
  "$out/runc" --version | head -n 1
  finish "$out" "$dest"
  rm -rf "$work/runc-$v"
}

build_cni() {
  local v="$CNI_PLUGINS_VERSION" dest="$bin_root/cni-plugins-$CNI_PLUGINS_VERSION"
  if built "$dest"; then log "cni-plugins $v: cached at $dest"; return; fi
  need_go
  local dir out="$work/cni-plugins-$v/out"; dir=$(module_dir "github.com/containernetworking/plugins@$v")
  rm -rf "$out" && mkdir -p "$out" && cd "$dir"
  log "cni-plugins $v: compiling bridge, host-local, loopback"
  CGO_ENABLED=0 go build -trimpath -tags "netgo osusergo" \
    -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$v" \
    -o "$out/" ./plugins/main/bridge ./plugins/ipam/host-local ./plugins/main/loopback
  finish "$out" "$dest"
  rm -rf "$work/cni-plugins-$v"
}

build_toolkit() {
  local v="$NVIDIA_CONTAINER_TOOLKIT_VERSION" dest="$bin_root/nvidia-container-toolkit-$NVIDIA_CONTAINER_TOOLKIT_VERSION"
  if built "$dest"; then log "nvidia-container-toolkit $v: cached at $dest"; return; fi
  need_go; need_cc "nvidia-container-toolkit (NVML through cgo)"
  local dir out="$work/nvidia-container-toolkit-$v/out"
  dir=$(module_dir "github.com/NVIDIA/nvidia-container-toolkit@$v")
  rm -rf "$out" && mkdir -p "$out" && cd "$dir"
  # upstream's Makefile flags: NVML symbols resolve when the driver's library is loaded
  local pkg=github.com/NVIDIA/nvidia-container-toolkit/internal/info
  local ld="-s -w -X $pkg.version=${v#v} -X $pkg.gitCommit=$v"
  ld+=" '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files -Wl,-z,lazy'"
  log "nvidia-container-toolkit $v: compiling nvidia-ctk, nvidia-container-runtime (cgo)"
  CGO_ENABLED=1 go build -trimpath -ldflags "$ld" -o "$out/" ./cmd/nvidia-ctk ./cmd/nvidia-container-runtime
  "$out/nvidia-ctk" --version | head -n 1
  finish "$out" "$dest"
  rm -rf "$work/nvidia-container-toolkit-$v"
}

build_nfd() {
  local v="$NFD_VERSION" dest="$bin_root/nfd-$NFD_VERSION"
  if built "$dest"; then log "node-feature-discovery $v: cached at $dest"; return; fi
  need_go
  local dir api tree="$work/nfd-$v/tree" out="$work/nfd-$v/out"
  dir=$(module_dir "sigs.k8s.io/node-feature-discovery@$v")
  # its go.mod replaces the api/nfd module with ./api/nfd, a nested module the proxy serves
  # separately (module zips leave nested modules out): put that one where the replace points
  api=$(module_dir "sigs.k8s.io/node-feature-discovery/api/nfd@$v")
  rm -rf "$tree" "$out" && mkdir -p "$out" && cp -r "$dir" "$tree" && chmod -R u+w "$tree"
  rm -rf "$tree/api/nfd" && cp -r "$api" "$tree/api/nfd" && chmod -R u+w "$tree/api/nfd"
  cd "$tree"
  # as upstream's image: host mounts under /host-*, static (pure Go cpuid on amd64)
  local ld="-s -w -X sigs.k8s.io/node-feature-discovery/pkg/version.version=$v"
  ld+=" -X sigs.k8s.io/node-feature-discovery/pkg/utils/hostpath.pathPrefix=/host-"
  log "node-feature-discovery $v: compiling nfd-master, nfd-worker"
  CGO_ENABLED=0 go build -trimpath -tags osusergo,netgo -ldflags "$ld" -o "$out/" ./cmd/nfd-master ./cmd/nfd-worker
  "$out/nfd-master" -version 2>&1 | head -n 1
  finish "$out" "$dest"
  rm -rf "$work/nfd-$v"
}

# build_prometheus: the Prometheus server, inside its own module (go.mod and go.sum apply), with
# only the Kubernetes service discovery (upstream's plugins/ build tags: remove_all_sd leaves out
# every SD, enable_kubernetes_sd brings that one back) and without the embedded web UI (the
# query API is all the node needs). Debian's prometheus package (2.42) has no Kubernetes SD.
build_prometheus() {
  local v="$PROMETHEUS_VERSION" dest="$bin_root/prometheus-$PROMETHEUS_VERSION"
  if built "$dest"; then log "prometheus $v: cached at $dest"; return; fi
  need_go
  local dir tree="$work/prometheus-$v/tree" out="$work/prometheus-$v/out"
  dir=$(module_dir "github.com/prometheus/prometheus@$v")
  rm -rf "$tree" "$out" && mkdir -p "$out" && cp -r "$dir" "$tree" && chmod -R u+w "$tree"
  cd "$tree"
  log "prometheus $v: compiling cmd/prometheus (Kubernetes SD only; slow on a cold cache)"
  # its go.work names nested modules the module zip leaves out: build the module alone
  GOWORK=off CGO_ENABLED=0 go build -trimpath -tags remove_all_sd,enable_kubernetes_sd,netgo \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$v" -o "$out/" ./cmd/prometheus
  "$out/prometheus" --version 2>&1 | head -n 1
  finish "$out" "$dest"
  rm -rf "$work/prometheus-$v"
}

# build_traefik: Traefik, inside its own module (go.mod and go.sum apply), the node's Gateway API
# implementation (its kubernetesGateway provider runs as a host process, like Prometheus), and
# the Gateway API CRDs it serves. Three things of the published module cannot come from the Go
# module proxy, so the tree built here differs from it in exactly these (upstream's code is
# otherwise untouched):
#   - its go.mod replaces github.com/traefik/traefik/dynamic/ext with ./pkg/config/dynamic/ext,
#     a nested module the zip leaves out: three empty extension types (HTTP, Router, RouterIng)
#     that the open-source build leaves empty; written here, with the same API;
#   - it replaces abbot/go-http-auth (basic/digest auth middlewares) with a containous fork
#     commit the proxy refuses: the upstream module v0.4.0 is used instead, which lacks two of
#     the fork's additions, so in this build the basicAuth middleware refuses every password
#     (fails closed; CheckSecret) and digestAuth asks stale clients to authenticate afresh
#     (RequireAuth for RequireAuthStale); the node uses neither;
#   - go-acme/lego's DNS-challenge providers edgedns, huaweicloud, oraclecloud, sakuracloud,
#     ucloud, yandexcloud need SDK versions the proxy refuses: a copy of lego without them.
# The web UI's assets are not in the module zip (npm builds them): the dashboard is empty.
# GATEWAY_API_VERSION's module needs a newer Go than this machine's to be `go get`; only its
# YAML is needed, so its zip, which `go mod download` fetches and verifies before it complains,
# is unpacked (as build_karpenter's).
LEGO_DROPPED=(edgedns huaweicloud oraclecloud sakuracloud ucloud yandexcloud)
build_traefik() {
  local v="$TRAEFIK_VERSION" gv="$GATEWAY_API_VERSION" dest="$bin_root/traefik-$TRAEFIK_VERSION-gwapi-$GATEWAY_API_VERSION"
  if built "$dest" traefik crds; then log "traefik $v: cached at $dest"; return; fi
  need_go
  local dir zip lego lv p tmp="$work/traefik-$v" out="$work/traefik-$v/out" tree="$work/traefik-$v/tree"
  dir=$(module_dir "github.com/traefik/traefik/v3@$v")
  rm -rf "$tmp" && mkdir -p "$out/crds"
  zip=$( (go mod download -json "sigs.k8s.io/gateway-api@$gv" || true) | sed -n 's/^\t"Zip": "\(.*\)",$/\1/p')
  [[ -n "$zip" && -f "$zip" ]] || die "could not download sigs.k8s.io/gateway-api $gv from the Go module proxy ($(go env GOPROXY))"
  python3 -m zipfile -e "$zip" "$tmp/gwapi"
  cp "$tmp/gwapi/sigs.k8s.io/gateway-api@$gv/config/crd/standard/"*.yaml "$out/crds/"
  cp -r "$dir" "$tree" && chmod -R u+w "$tree" && cd "$tree"
  mkdir -p pkg/config/dynamic/ext
  printf 'module github.com/traefik/traefik/dynamic/ext\n\ngo 1.24\n' > pkg/config/dynamic/ext/go.mod
  cat > pkg/config/dynamic/ext/ext.go <<'GO'
// Package ext: the extension points of Traefik's dynamic configuration, empty in this build.
package ext

type HTTP struct{}

type Router struct{}

type RouterIng struct{}

func (RouterIng) ToRouter() Router { return Router{} }
GO
  lv=$(go list -m -f '{{.Version}}' github.com/go-acme/lego/v5)
  lego=$(module_dir "github.com/go-acme/lego/v5@$lv")
  cp -r "$lego" "$tmp/lego" && chmod -R u+w "$tmp/lego"
  for p in "${LEGO_DROPPED[@]}"; do
    rm -rf "$tmp/lego/providers/dns/$p"
    sed -i -e "\#\"github.com/go-acme/lego/v5/providers/dns/$p\"#d" \
      -e "/^\tcase \"$p\"/,+1d" "$tmp/lego/providers/dns/zz_gen_dns_providers.go"
  done
  sed -i '/^\tcase "edgedns", "fastdns":/,+1d' "$tmp/lego/providers/dns/zz_gen_dns_providers.go"
  sed -i 's/checkSecret:       goauth.CheckSecret,/checkSecret:       func(string, string) bool { return false },/' \
    pkg/middlewares/auth/basic_auth.go
  sed -i 's/d.auth.RequireAuthStale(rw, req)/d.auth.RequireAuth(rw, req)/' pkg/middlewares/auth/digest_auth.go
  go mod edit -dropreplace=github.com/abbot/go-http-auth \
    -replace=github.com/abbot/go-http-auth=github.com/abbot/go-http-auth@v0.4.0 \
    -replace="github.com/go-acme/lego/v5=$tmp/lego"
  log "traefik $v: compiling cmd/traefik (slow on a cold cache)"
  GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 go build -trimpath -tags netgo \
    -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$v" -o "$out/" ./cmd/traefik
  "$out/traefik" version 2>&1 | head -n 1
  finish "$out" "$dest"
  rm -rf "$tmp"
}

# ---- NVIDIA sources from --nvidia-src ----
build_device_plugin() {
  local v="$NVIDIA_DEVICE_PLUGIN_VERSION" dest="$bin_root/nvidia-device-plugin-$NVIDIA_DEVICE_PLUGIN_VERSION"
  if built "$dest" mps-control-daemon; then log "nvidia-device-plugin $v: cached at $dest"; return; fi
  need_go; need_cc "the NVIDIA device plugin (NVML through cgo)"
  local root out="$work/nvidia-device-plugin-$v/out"
  root=$(nvidia_src k8s-device-plugin "$v" github.com/NVIDIA/k8s-device-plugin cmd/gpu-feature-discovery \
    "https://github.com/NVIDIA/k8s-device-plugin/archive/refs/tags/$v.tar.gz")
  rm -rf "$out" && mkdir -p "$out" && cd "$root"
  local ld="-s -w -X github.com/NVIDIA/k8s-device-plugin/internal/info.version=$v"
  ld+=" -X github.com/NVIDIA/k8s-device-plugin/internal/info.gitCommit=$v"
  log "nvidia-device-plugin $v: compiling nvidia-device-plugin, gpu-feature-discovery, config-manager, mps-control-daemon (cgo)"
  CGO_ENABLED=1 GOFLAGS="-mod=vendor -buildvcs=false" go build -trimpath -ldflags "$ld" -o "$out/" \
    ./cmd/nvidia-device-plugin ./cmd/gpu-feature-discovery ./cmd/config-manager \
    ./cmd/mps-control-daemon
  "$out/nvidia-device-plugin" --version 2>&1 | head -n 1
  finish "$out" "$dest"
  rm -rf "$work/nvidia-device-plugin-$v"
}

build_mock_nvml() {
  local c="$MOCK_NVML_COMMIT" dest="$bin_root/mock-nvml-$MOCK_NVML_COMMIT"
  if built "$dest"; then log "mock NVML $c: cached at $dest"; return; fi
  need_go; need_cc "the mock NVML (a cgo shared library)"
  command -v make >/dev/null 2>&1 || die "the mock NVML is built by its Makefile: install make" 2
  local root out="$work/mock-nvml-$c/out" tree="$work/mock-nvml-$c/tree"
  root=$(nvidia_src k8s-test-infra "$c" github.com/NVIDIA/k8s-test-infra pkg/gpu/mocknvml \
    "https://github.com/NVIDIA/k8s-test-infra/archive/$c.tar.gz")
  # built in a copy: upstream's Makefile writes its output next to the sources
  rm -rf "$tree" "$out" && mkdir -p "$tree" "$out/configs"
  cp -a "$root/go.mod" "$root/go.sum" "$root/vendor" "$root/pkg" "$tree/"
  log "mock NVML $c: compiling libnvidia-ml.so.$MOCK_NVML_LIB_VERSION (make NO_PADDING=1)"
  GOFLAGS="-mod=vendor -buildvcs=false -trimpath" \
    make -C "$tree/pkg/gpu/mocknvml" NO_PADDING=1 LIB_VERSION="$MOCK_NVML_LIB_VERSION" >&2
  cp -a "$tree/pkg/gpu/mocknvml/libnvidia-ml.so.$MOCK_NVML_LIB_VERSION" "$out/"
  cp -a "$tree/pkg/gpu/mocknvml/configs/"*.yaml "$out/configs/"
  finish "$out" "$dest"
  rm -rf "$work/mock-nvml-$c"
}

build_gpu_operator() {
  local v="$GPU_OPERATOR_VERSION" dest="$bin_root/gpu-operator-$GPU_OPERATOR_VERSION"
  if built "$dest" gpu-operator nvidia-validator cleanup-gpuclusters; then
    log "gpu-operator $v: cached at $dest"; return
  fi
  need_go
  local root out="$work/gpu-operator-$v/out"
  root=$(nvidia_src gpu-operator "$v" github.com/NVIDIA/gpu-operator cmd/nvidia-validator \
    "https://github.com/NVIDIA/gpu-operator/archive/refs/tags/$v.tar.gz")
  rm -rf "$out" && mkdir -p "$out" && cd "$root"
  # static, as upstream's distroless image; the operator reads its operand manifests at run
  # time from /opt/gpu-operator (assets/, manifests/), the validator its pods' from
  # /opt/validator/manifests: they travel with the binaries
  log "gpu-operator $v: compiling gpu-operator, nvidia-validator, cleanup-gpuclusters"
  CGO_ENABLED=0 GOFLAGS="-mod=vendor -buildvcs=false" go build -trimpath \
    -ldflags "-s -w -X github.com/NVIDIA/gpu-operator/internal/info.version=$v" -o "$out/" \
    ./cmd/gpu-operator ./cmd/nvidia-validator ./cmd/cleanup-gpuclusters
  cp -a assets manifests "$out/"
  cp -a validator/manifests "$out/validator-manifests"
  finish "$out" "$dest"
  rm -rf "$work/gpu-operator-$v"
}

build_busybox() {
  local bb; bb=$(command -v busybox || true)
  [[ -n "$bb" ]] || die "no busybox on this host: install busybox-static (Debian/Ubuntu)" 2
  # it becomes the root of images that have no libc: it must be static
  if LC_ALL=C ldd "$bb" >/dev/null 2>&1; then
    die "$bb is dynamically linked: install busybox-static (Debian/Ubuntu)" 2
  fi
  local v; v=$({ "$bb" --help 2>&1 || true; } | sed -n '1s/^BusyBox \(v[0-9.]*\).*/\1/p')
  [[ -n "$v" ]] || die "could not read the version of $bb"
  local dest="$bin_root/busybox-$v"
  if built "$dest"; then log "busybox $v: cached at $dest"; return; fi
  local out="$work/busybox-$v/out"; rm -rf "$out" && mkdir -p "$out"
  cp "$bb" "$out/busybox"
  { "$bb" --help 2>&1 || true; } | head -n 1 > "$out/VERSION"
  finish "$out" "$dest"
  rm -rf "$work/busybox-$v"
}

run_one() {
  local t0; t0=$(date +%s)
  case "$1" in
    kubelet) build_kubernetes_commands kubelet kubelet ;;
    containerd) build_containerd ;;
    runc) build_runc ;;
    cni) build_cni ;;
    toolkit) build_toolkit ;;
    nfd) build_nfd ;;
    device-plugin) build_device_plugin ;;
    mock-nvml) build_mock_nvml ;;
    busybox) build_busybox ;;
    prometheus) build_prometheus ;;
    traefik) build_traefik ;;
    gpu-operator) build_gpu_operator ;;
    *) die "unknown component '$1' (one of: all ${COMPONENTS[*]} ${OPTIONAL[*]})" 2 ;;
  esac
  log "$1: done in $(( $(date +%s) - t0 ))s"
}

# ---- arguments ----
targets=()
while (($#)); do
  case "$1" in
    --nvidia-src) [[ $# -ge 2 ]] || die "--nvidia-src needs a folder" 2; NVIDIA_SRC="$2"; shift 2 ;;
    --nvidia-src=*) NVIDIA_SRC="${1#*=}"; shift ;;
    --one) run_one "$2"; exit 0 ;;   # internal: one component, in its own process (set -e intact)
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    all) targets+=("${COMPONENTS[@]}"); shift ;;
    -*) die "unknown option $1 (usage: $0 [--nvidia-src DIR] [all|COMPONENT...])" 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${COMPONENTS[@]}")
if [[ -n "${NVIDIA_SRC:-}" ]]; then NVIDIA_SRC="$(cd "$NVIDIA_SRC" 2>/dev/null && pwd || echo "$NVIDIA_SRC")"; fi
export NVIDIA_SRC

start=$(date +%s)
failed=() missing=()
for t in "${targets[@]}"; do
  # each component in its own process: one that cannot build does not stop the others
  rc=0; bash "$0" --one "$t" || rc=$?
  case $rc in 0) ;; 2) missing+=("$t") ;; *) failed+=("$t") ;; esac
done
log "done in $(( $(date +%s) - start ))s; binaries under $bin_root"
((${#failed[@]})) && echo "error: node build failed: ${failed[*]} (see above)" >&2
((${#missing[@]})) && echo "error: node build skipped for missing prerequisites: ${missing[*]} (see above)" >&2
((${#failed[@]})) && exit 1
((${#missing[@]})) && exit 2
exit 0
