#!/usr/bin/env bash
# Create and prepare kind clusters with NVIDIA GPUs, the way NVIDIA's kind demo does it
# (k8s-device-plugin demo/clusters/kind and NVIDIA/nvkind). The CI pipelines in ci/github and
# ci/gitlab call this script so both run the same steps.
#
#   gpu-kind.sh host                             configure the host's Docker for GPU passthrough
#   gpu-kind.sh create NAME CONFIG [NODE_IMAGE]  kind create cluster from a kind-config/ file
#   gpu-kind.sh nodes NAME [--install-toolkit]   prepare the GPU workers, add RuntimeClass nvidia
#   gpu-kind.sh delete NAME                      delete the cluster (never fails)
#
# Needs on the host: an NVIDIA driver, the NVIDIA Container Toolkit (nvidia-ctk), Docker,
# kind and kubectl. Root or passwordless sudo for the host step.
set -euo pipefail

SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"

log() { printf '[gpu-kind] %s\n' "$*"; }
die() { printf '[gpu-kind] error: %s\n' "$*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is required on this host"; }

# Host: make the nvidia runtime Docker's default and let it read the GPU list from volume
# mounts under /var/run/nvidia-container-devices (the /dev/null mounts in the kind configs).
cmd_host() {
  need docker; need nvidia-ctk; need nvidia-smi
  nvidia-smi -L >/dev/null || die "nvidia-smi -L failed: the host driver is not healthy"
  log "configuring Docker for NVIDIA GPUs"
  $SUDO nvidia-ctk runtime configure --runtime=docker --set-as-default --cdi.enabled
  $SUDO nvidia-ctk config --set accept-nvidia-visible-devices-as-volume-mounts=true --in-place
  $SUDO systemctl restart docker
}

cmd_create() {
  local name=${1:?cluster name} config=${2:?kind config file} image=${3:-}
  need kind; need docker
  [[ -f $config ]] || die "kind config not found: $config"
  log "creating kind cluster $name from $config"
  kind create cluster --name "$name" --config "$config" --wait 5m ${image:+--image "$image"}
}

# Node containers that got a GPU mount (a /var/run/nvidia-container-devices entry).
gpu_nodes() {
  local node
  for node in $(kind get nodes --name "$1"); do
    if docker exec "$node" test -d /var/run/nvidia-container-devices; then
      echo "$node"
    fi
  done
}

# Inside one GPU worker: keep the driver from recreating device nodes on demand and remove
# the nodes of GPUs this worker was not given, so workers with different GPUs stay apart
# (what nvkind's PatchProcDriverNvidia and removeDeviceNodes do).
isolate_devices() {
  local node=$1 assigned
  assigned=$(docker exec "$node" ls /var/run/nvidia-container-devices | tr '\n' ' ')
  log "$node: GPUs $assigned"
  docker exec -i "$node" bash -s -- "$assigned" <<'NODE'
set -euo pipefail
assigned=" $1 "
if ! grep -q '^ModifyDeviceFiles: 0$' /proc/driver/nvidia/params 2>/dev/null; then
  # Older toolkits mask the whole directory with a tmpfs; the demo unmounts it.
  if mountpoint -q /proc/driver/nvidia; then umount -R /proc/driver/nvidia; fi
  if [[ -f /proc/driver/nvidia/params ]]; then
    cp /proc/driver/nvidia/params /root/gpu-params
    sed -i 's/^ModifyDeviceFiles: 1$/ModifyDeviceFiles: 0/' /root/gpu-params
    mount --bind /root/gpu-params /proc/driver/nvidia/params
  fi
fi
if [[ $assigned != *" all "* ]]; then
  for dev in /dev/nvidia[0-9]*; do
    [[ -e $dev ]] || continue
    [[ $assigned == *" ${dev#/dev/nvidia} "* ]] && continue
    while umount "$dev" 2>/dev/null; do :; done
    rm -f "$dev"
  done
fi
NODE
}

# Inside one GPU worker: install the container toolkit and make nvidia containerd's default
# runtime (not needed when the GPU Operator deploys the toolkit: toolkit.enabled=true).
install_toolkit() {
  local node=$1
  log "$node: installing the NVIDIA Container Toolkit"
  docker exec "$node" bash -c '
    set -euo pipefail
    apt-get update && apt-get install -y gpg curl
    curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey \
      | gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
    curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list \
      | sed "s#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#g" \
      > /etc/apt/sources.list.d/nvidia-container-toolkit.list
    apt-get update && apt-get install -y nvidia-container-toolkit'
  docker exec "$node" bash -c '
    nvidia-ctk runtime configure --runtime=containerd --set-as-default --cdi.enabled \
      && systemctl restart containerd'
}

cmd_nodes() {
  local name=${1:?cluster name} install=${2:-} node found=0
  need kind; need docker; need kubectl
  for node in $(gpu_nodes "$name"); do
    found=1
    isolate_devices "$node"
    if [[ $install == --install-toolkit ]]; then install_toolkit "$node"; fi
  done
  [[ $found == 1 ]] || die "no node of cluster $name has a GPU mount (see kind-config/)"
  kubectl --context "kind-$name" apply -f - <<'YAML'
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia
handler: nvidia
YAML
}

cmd_delete() {
  local name=${1:?cluster name}
  if command -v kind >/dev/null 2>&1; then
    kind delete cluster --name "$name" || log "could not delete cluster $name"
  fi
}

case "${1:-}" in
  host) shift; cmd_host "$@" ;;
  create) shift; cmd_create "$@" ;;
  nodes) shift; cmd_nodes "$@" ;;
  delete) shift; cmd_delete "$@" ;;
  *) sed -n '2,11p' "$0" >&2; exit 2 ;;
esac
