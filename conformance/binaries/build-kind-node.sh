#!/usr/bin/env bash
# Build kind's node image on a machine that reaches no container registry, with kind's own
# `kind build node-image --type file` (`make kind-node`; opt-in, not in `make setup`):
#
#   1. binaries from the Go module proxy: kind; kubeadm, kubectl, kube-proxy (KUBERNETES_VERSION,
#      lib.sh's recipe); etcd and CoreDNS at the versions that kubeadm itself lists; crictl at the
#      version kind's base Dockerfile pins; the CNI plugins kind's base carries; Rancher's
#      local-path-provisioner (kind's default storage); pause.c of the Kubernetes module (gcc);
#   2. kindest/base made locally: a debootstrap Debian trixie minbase (the Dockerfile's
#      debian:trixie-slim) and kind's images/base/Dockerfile, unchanged, built to its `base`
#      stage by buildah; its other stages clone from GitHub, so the binaries of step 1 and the
#      node target's containerd and runc take their place (the `build` stage's steps, replayed);
#   3. the images kubeadm and kind's manifests name (kube-apiserver, ..., etcd, coredns, pause,
#      local-path-*, kindnetd), each from the binaries above, and a kubernetes-server tarball
#      laid out as kind's `file` type reads it;
#   4. `kind build node-image --type file` with Podman answering as `docker` (kind's node-image
#      builder calls the docker CLI) -> localhost/kindest/node:KUBERNETES_VERSION.
#
# Two stand-ins, both named in their image labels and in README's kind section: kindnetd (kind's
# CNI; its module, sigs.k8s.io/kindnet, is refused by the module proxy) is an image that only says
# so and exits 1 (clusters from this node image use `networking.disableDefaultCNI` and a ptp
# conflist); local-path-provisioner is v0.0.30 (the proxy refuses kind's v0.0.34).
#
# Podman on a restricted host needs CONTAINERS_CONF (runc, limits within the host's): README.
# Usage: build-kind-node.sh [--force]   (current when built from this script and versions.env)
# Needs root, Go, gcc, buildah, podman, debootstrap, the Debian mirror.
set -euo pipefail

BUILD_LOG_NAME=kind-node
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh (the pins, the cache, log/die/built/finish, build_simple, build_kubernetes_commands)
source "$here/lib.sh"
need_go
need_cc "pause"
for tool in buildah podman debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: apt-get install -y $tool (as root), then make kind-node" 2
done
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
export BUILDAH_ISOLATION=${BUILDAH_ISOLATION:-chroot}  # crun is refused here: ci/build-image.sh

images="$cache/images"
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN=localhost/gpuconf-debian:trixie-slim
BASE=localhost/kindest/base:$KIND_VERSION-gpuconf
NODE=${KIND_NODE_IMAGE:-localhost/kindest/node:$KUBERNETES_VERSION}
mkdir -p "$images" "$cache/kind"
start=$(date +%s)

# current: built from this script and these pins (their sha256 beside the image); --force builds
inputs=$(cat "$here/build-kind-node.sh" "$here/versions.env" | sha256sum | cut -d' ' -f1)
stamp="$cache/kind/node-image.inputs"
if [[ ${1:-} != --force ]] && podman image exists "$NODE" 2>/dev/null \
   && [[ "$(cat "$stamp" 2>/dev/null)" == "$NODE $inputs" ]]; then
  log "node image $NODE: current (built from these inputs; --force builds again)"
  exit 0
fi

# -- 1. binaries ---------------------------------------------------------------------------------
"$here/build-controlplane.sh" kind
"$here/build-node.sh" kubelet containerd runc
build_kubernetes_commands kind-kubernetes kube-proxy kubeadm kubectl  # kube-proxy: the one with --version
cd "$work"  # the recipes remove their module folder, the shell's current one
kube="$bin_root/kind-kubernetes-$KUBERNETES_VERSION"
kind_src=$(module_dir "sigs.k8s.io/kind@$KIND_VERSION")
kind_bin="$bin_root/kind-$KIND_VERSION/kind"

# what kubeadm pulls for this version (etcd, coredns, pause), and what kind's manifests name
mapfile -t kubeadm_images < <("$kube/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION")
image_of() { printf '%s\n' "${kubeadm_images[@]}" | grep -m1 "/$1:" || die "kubeadm lists no $1 image"; }
etcd_ref=$(image_of etcd) coredns_ref=$(image_of coredns) pause_ref=$(image_of pause)
etcd_v="v${etcd_ref##*:}"; etcd_v="${etcd_v%-*}"          # 3.6.8-0 -> v3.6.8
coredns_v="${coredns_ref##*:}"
kind_const() { sed -n "s/^const $1 = \"\(.*\)\"$/\1/p" "$kind_src/pkg/build/nodeimage/$2"; }
kindnetd_ref=$(kind_const kindnetdImage const_cni.go)
provisioner_ref=$(kind_const storageProvisionerImage const_storage.go)
helper_ref=$(kind_const storageHelperImage const_storage.go)
sandbox_ref=$(sed -n 's/^ *sandbox_image = "\(.*\)"$/\1/p' "$kind_src/images/base/files/etc/containerd/config.toml")
crictl_v=$(sed -n 's/^ARG CRICTL_VERSION="\(.*\)"$/\1/p' "$kind_src/images/base/Dockerfile")
for ref in etcd_v coredns_v kindnetd_ref provisioner_ref helper_ref sandbox_ref crictl_v; do
  [[ -n ${!ref} ]] || die "could not read $ref from kubeadm or kind $KIND_VERSION's source: revisit build-kind-node.sh"
done
log "kubeadm $KUBERNETES_VERSION lists etcd $etcd_v, coredns $coredns_v, $pause_ref; kind's base pins crictl $crictl_v"

build_simple etcd "$etcd_v" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3
build_simple coredns "$coredns_v" github.com/coredns/coredns github.com/coredns/coredns
build_simple crictl "$crictl_v" sigs.k8s.io/cri-tools sigs.k8s.io/cri-tools/cmd/crictl
build_simple local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSION" \
  github.com/rancher/local-path-provisioner github.com/rancher/local-path-provisioner
cd "$work"

build_kind_cni() {  # the four plugins kind's base installs, at the node target's CNI version
  local v="$CNI_PLUGINS_VERSION" dest="$bin_root/kind-cni-plugins-$CNI_PLUGINS_VERSION" src out
  if built "$dest" host-local loopback ptp portmap; then log "kind cni-plugins $v: cached at $dest"; return; fi
  src=$(module_dir "github.com/containernetworking/plugins@$v") out="$work/kind-cni-plugins-$v"
  rm -rf "$out" && mkdir -p "$out" && cd "$src"
  log "kind cni-plugins $v: compiling host-local, loopback, ptp, portmap"
  go build -trimpath -ldflags "-s -w" -o "$out/" ./plugins/ipam/host-local ./plugins/main/loopback \
    ./plugins/main/ptp ./plugins/meta/portmap
  finish "$out" "$dest"
  cd "$work"
}
build_kind_cni

build_pause() {  # pause.c of k8s.io/kubernetes (build/pause/linux), static, as its Makefile does
  local dest="$bin_root/pause-$KUBERNETES_VERSION" src out
  if built "$dest" pause; then log "pause: cached at $dest"; return; fi
  src=$(module_dir "k8s.io/kubernetes@$KUBERNETES_VERSION")/build/pause/linux/pause.c
  out="$work/pause-$KUBERNETES_VERSION" && rm -rf "$out" && mkdir -p "$out"
  log "pause: compiling $src"
  gcc -Os -Wall -Werror -static -DVERSION="${pause_ref##*:}" -o "$out/pause" "$src"
  strip "$out/pause"
  finish "$out" "$dest"
}
build_pause

# -- 2. kindest/base -------------------------------------------------------------------------------
have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }
if ! have_image "$DEBIAN"; then
  tarball="$images/base-debian-trixie-minbase.tar"
  if [[ ! -s $tarball ]]; then
    root=$(mktemp -d "$images/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    log "debian: debootstrap --variant=minbase trixie from $mirror (a minute or two)"
    debootstrap --variant=minbase trixie "$root" "$mirror" >"$images/debootstrap-trixie.log" 2>&1 \
      || die "debootstrap failed: see $images/debootstrap-trixie.log"
    chroot "$root" apt-get clean
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
    tar -C "$root" --numeric-owner -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball"
    rm -rf "$root"; trap - EXIT
  fi
  ctr=$(buildah from scratch)
  buildah add "$ctr" "$tarball" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash \
    --label org.opencontainers.image.description="Debian trixie minbase by debootstrap (local stand-in for debian:trixie-slim)" "$ctr"
  buildah commit -q "$ctr" "$DEBIAN" >/dev/null && buildah rm "$ctr" >/dev/null
fi

if ! have_image "$BASE"; then
  log "kindest/base: kind $KIND_VERSION images/base/Dockerfile, stage base, FROM $DEBIAN"
  buildah bud --layers --target base --build-arg "BASE_IMAGE=$DEBIAN" -t "$BASE-stage" \
    -f "$kind_src/images/base/Dockerfile" "$kind_src/images/base" 2>&1 | sed 's/^/   /'
  log "kindest/base: the Dockerfile's build stage with the binaries built here"
  ctr=$(buildah from -q "$BASE-stage")
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  for f in containerd ctr containerd-shim-runc-v2; do
    buildah copy --chmod 0755 "$ctr" "$bin_root/containerd-$CONTAINERD_VERSION/$f" /usr/local/bin/ >/dev/null
  done
  buildah copy --chmod 0755 "$ctr" "$bin_root/runc-$RUNC_VERSION/runc" /usr/local/sbin/runc >/dev/null
  buildah copy --chmod 0755 "$ctr" "$bin_root/crictl-$crictl_v/crictl" /usr/local/bin/ >/dev/null
  for f in host-local loopback ptp portmap; do
    buildah copy --chmod 0755 "$ctr" "$bin_root/kind-cni-plugins-$CNI_PLUGINS_VERSION/$f" /opt/cni/bin/ >/dev/null
  done
  # shellcheck disable=SC2016 # jq's own syntax
  buildah run "$ctr" -- sh -c 'ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" | jq "del(.process.rlimits)" > /etc/containerd/cri-base.json && containerd --version && runc --version >/dev/null'
  buildah config --env container=docker --stop-signal SIGRTMIN+3 \
    --entrypoint '["/usr/local/bin/entrypoint", "/sbin/init"]' --cmd '' \
    --label org.opencontainers.image.description="kindest/base of kind $KIND_VERSION made locally: Debian trixie, containerd $CONTAINERD_VERSION, runc $RUNC_VERSION, crictl $crictl_v, CNI plugins $CNI_PLUGINS_VERSION" "$ctr"
  buildah commit -q --squash "$ctr" "$BASE" >/dev/null
  buildah rm "$ctr" >/dev/null; trap - EXIT
  buildah rmi "$BASE-stage" >/dev/null 2>&1 || true
fi

# -- 3. the images and the kubernetes-server tarball ----------------------------------------------
# image REF FROM DESCRIPTION ENTRYPOINT_JSON FILE:DEST...: a one-layer image of the files given
image() {
  local ref=$1 from=$2 what=$3 entry=$4 ctr pair; shift 4
  ctr=$(buildah from -q "$from")
  for pair in "$@"; do buildah copy --chmod 0755 "$ctr" "${pair%%:*}" "${pair#*:}" >/dev/null; done
  buildah config --entrypoint "$entry" --cmd '' \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --label "org.opencontainers.image.description=$what" "$ctr"
  buildah commit -q "$ctr" "$ref" >/dev/null && buildah rm "$ctr" >/dev/null
}
log "images: the control plane, kube-proxy, etcd, coredns, pause, local-path, kindnetd (stand-in)"
server="$bin_root/kubernetes-$KUBERNETES_VERSION"
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  image "registry.k8s.io/$c:$KUBERNETES_VERSION" scratch "$c $KUBERNETES_VERSION built here" \
    "[\"/usr/local/bin/$c\"]" "$server/$c:/usr/local/bin/$c"
done
# kube-proxy programs iptables: Debian's iptables, nftables and conntrack (as distroless-iptables)
ctr=$(buildah from -q "$DEBIAN")
buildah run "$ctr" -- sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables nftables conntrack >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*'
buildah commit -q "$ctr" localhost/gpuconf-kube-proxy-base >/dev/null && buildah rm "$ctr" >/dev/null
image "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION" localhost/gpuconf-kube-proxy-base \
  "kube-proxy $KUBERNETES_VERSION built here, on Debian trixie with iptables" \
  '["/usr/local/bin/kube-proxy"]' "$kube/kube-proxy:/usr/local/bin/kube-proxy"
image "$etcd_ref" scratch "etcd $etcd_v built here" '["/usr/local/bin/etcd"]' \
  "$bin_root/etcd-$etcd_v/etcd:/usr/local/bin/etcd"
image "$coredns_ref" scratch "CoreDNS $coredns_v built here" '["/coredns"]' \
  "$bin_root/coredns-$coredns_v/coredns:/coredns"
image "$pause_ref" scratch "pause.c of Kubernetes $KUBERNETES_VERSION built here" '["/pause"]' \
  "$bin_root/pause-$KUBERNETES_VERSION/pause:/pause"
buildah tag "$pause_ref" "$sandbox_ref"
image "$provisioner_ref" scratch \
  "Rancher local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION built here (kind $KIND_VERSION pins v0.0.34, which the module proxy refuses)" \
  '["/usr/local/bin/local-path-provisioner"]' \
  "$bin_root/local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION/local-path-provisioner:/usr/local/bin/local-path-provisioner"
# busybox_image REF DESCRIPTION ENTRYPOINT_JSON [SCRIPT]: a static busybox (Debian's busybox-static)
# with its sh, mkdir and rm applets, and SCRIPT as /bin/run when given
busybox_image() {
  local ref=$1 what=$2 entry=$3 script=${4:-} dir ctr
  dir=$(mktemp -d) && mkdir -p "$dir/bin" && cp /bin/busybox "$dir/bin/busybox"
  for applet in sh mkdir rm; do ln -s busybox "$dir/bin/$applet"; done
  if [[ -n $script ]]; then printf '%s\n' "$script" > "$dir/bin/run" && chmod 0755 "$dir/bin/run"; fi
  tar -C "$dir" --numeric-owner --owner=0 --group=0 -cf "$dir.tar" bin
  ctr=$(buildah from -q scratch)
  buildah add "$ctr" "$dir.tar" / >/dev/null
  buildah config --env PATH=/bin --entrypoint "$entry" --cmd '' \
    --label "org.opencontainers.image.description=$what" "$ctr"
  buildah commit -q "$ctr" "$ref" >/dev/null && buildah rm "$ctr" >/dev/null
  rm -rf "$dir" "$dir.tar"
}
[[ -x /bin/busybox ]] || die "/bin/busybox is missing: apt-get install -y busybox-static" 2
busybox_image "$helper_ref" "local-path helper: a static busybox's sh, mkdir, rm (kind's is distroless with bash's)" '[]'
busybox_image "$kindnetd_ref" \
  "STAND-IN, not kindnetd: says why and exits 1 (kindnet's source is refused by the module proxy)" \
  '["/bin/run"]' '#!/bin/sh
echo "kindnetd is not built here: its module, sigs.k8s.io/kindnet, is refused by the Go module proxy; create clusters from this node image with networking.disableDefaultCNI (README, kind on this machine)" >&2
exit 1'

tree="$work/kind-node-tarball"
rm -rf "$tree" && mkdir -p "$tree/kubernetes/server/bin"
echo "$KUBERNETES_VERSION" > "$tree/kubernetes/version"
cp "$kube/kubeadm" "$kube/kubectl" "$bin_root/kubelet-$KUBERNETES_VERSION/kubelet" "$tree/kubernetes/server/bin/"
# kind's file type imports the four control-plane archives only and pulls everything else kubeadm
# and its manifests name; with no registry here the add-ons ride in kube-proxy.tar (an archive of
# several images, as `docker save` writes one)
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  podman save -q --format docker-archive -o "$tree/kubernetes/server/bin/$c.tar" "registry.k8s.io/$c:$KUBERNETES_VERSION"
done
several="$work/kind-node-images"
rm -rf "$several" && mkdir -p "$several"
podman save -q --format docker-archive -m -o "$several.tar" \
  "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION" "$etcd_ref" "$coredns_ref" "$pause_ref" "$sandbox_ref" \
  "$provisioner_ref" "$helper_ref" "$kindnetd_ref"
# kind takes an archive's tags from the first metadata file in it: of manifest.json, only the
# first image's; `repositories` names every image's. Podman writes manifest.json first, so the
# archive is packed again with `repositories` first (the order of a tar's entries is free).
tar -C "$several" -xf "$several.tar" && rm -f "$several.tar"
(cd "$several" && find . -mindepth 1 -maxdepth 1 ! -name repositories -printf '%P\n' | LC_ALL=C sort \
  | tar --numeric-owner -cf "$tree/kubernetes/server/bin/kube-proxy.tar" repositories -T -)
rm -rf "$several"
server_tar="$work/kubernetes-server-linux-amd64.tar.gz"
tar -C "$tree" -czf "$server_tar" kubernetes
rm -rf "$tree"

# -- 4. kind build node-image -----------------------------------------------------------------------
# Podman's defaults are refused on a host that withholds CAP_SYS_RESOURCE or keeps a hybrid cgroup
# layout (README, kind on this machine): where its trivial container fails and CONTAINERS_CONF is
# unset, $cache/kind/containers.conf (runc, the host's own limits) is written and used, and named.
podman_conf="$cache/kind/containers.conf"
probe_podman() { podman run --rm --network none --rootfs "$1" /busybox true >/dev/null 2>&1; }
probe_root=$(mktemp -d) && cp /bin/busybox "$probe_root/busybox"
if [[ -z ${CONTAINERS_CONF:-} ]] && ! probe_podman "$probe_root"; then
  mkdir -p "$(dirname "$podman_conf")"
  nofile=$(ulimit -Hn) nproc=$(ulimit -Hu)
  (( nproc > 32768 )) && nproc=32768  # Podman lowers its children's process limit to 32768
  cat > "$podman_conf" <<EOF
# written by build-kind-node.sh: Podman's defaults were refused here (README, kind on this machine)
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
[engine.runtimes]
runc = ["$bin_root/runc-$RUNC_VERSION/runc"]
EOF
  export CONTAINERS_CONF="$podman_conf"
  probe_podman "$probe_root" || die "podman cannot run a container here, even with $podman_conf: see README, kind on this machine"
  log "podman: its defaults are refused here; using CONTAINERS_CONF=$podman_conf (runc, nofile $nofile, nproc $nproc)"
fi
rm -rf "$probe_root"
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
ln -s "$(command -v podman)" "$shim/docker"  # what Debian's podman-docker package installs
log "kind build node-image --type file (Podman as docker) -> $NODE"
PATH="$shim:$PATH" "$kind_bin" build node-image --type file --base-image "$BASE" --image "$NODE" "$server_tar"
rm -f "$server_tar"
echo "$NODE $inputs" > "$stamp"
log "node image $NODE: $(podman image inspect --format '{{.Size}}' "$NODE" | numfmt --to=iec) in $(( $(date +%s) - start ))s"
