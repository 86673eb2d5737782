#!/usr/bin/env bash
# Pack what h200-node.sh unpacks on the H200 machine into .stage/ (ignored by git; named in the
# device call's `carry`): the binaries from this machine's cache (`make setup NVIDIA_SRC=...`)
# as two solid xz archives, each < 45 MiB so that a call carries one with the working tree and
# the wheels, and the device plugin chart (with its NFD subchart) from NVIDIA_SRC's tag; where the
# GPU Operator is built, a third archive of it and its chart.
# Solid xz with a 1 GiB dictionary finds what the Go binaries share (the Kubernetes ones most):
# 747 MB of binaries become ~85 MB, where one archive per binary gives ~160 MB. It is slow
# (~25 min a stage on 2 busy cores): run once per version bump.
#   bash ci/device/stage-node.sh [NVIDIA_SRC]
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${1:-${NVIDIA_SRC:-../shared/upstream}}
BIN=${GPUCONF_CACHE:-$HOME/.cache/gpu-conformance}/bin
source conformance/binaries/versions.env
K=$KUBERNETES_VERSION
STAGE1=(kubernetes-$K/kube-apiserver kubernetes-$K/kube-controller-manager
        kubernetes-$K/kube-scheduler kubelet-$K etcd-$ETCD_VERSION helm-$HELM_VERSION)
STAGE2=(kwok-$KWOK_VERSION containerd-$CONTAINERD_VERSION runc-$RUNC_VERSION
        cni-plugins-$CNI_PLUGINS_VERSION nvidia-container-toolkit-$NVIDIA_CONTAINER_TOOLKIT_VERSION
        nfd-$NFD_VERSION nvidia-device-plugin-$NVIDIA_DEVICE_PLUGIN_VERSION)
mkdir -p .stage/src
busybox=$(cd "$BIN" && ls -d busybox-v* | tail -n 1)
pack() {  # pack NAME PATH...: NAME.tar.xz of PATHs below the cache's bin folder
  local name=$1; shift
  tar -C "$BIN" -cf - "$@" | xz -9e --x86 --lzma2=preset=9e,dict=1GiB -T1 > ".stage/$name.tar.xz.tmp"
  mv ".stage/$name.tar.xz.tmp" ".stage/$name.tar.xz"
  echo "$name: $(du -b ".stage/$name.tar.xz" | cut -f1) bytes"
}
pack stage1 "${STAGE1[@]}" &
pack stage2 "${STAGE2[@]}" "$busybox" &
# the GPU Operator (opt-in: build-node.sh gpu-operator), its own call: ~18 MB
if [[ -d "$BIN/gpu-operator-$GPU_OPERATOR_VERSION" ]]; then
  pack operator "gpu-operator-$GPU_OPERATOR_VERSION" &
fi
wait
op_chart=$(grep -l '^name: gpu-operator$' $(find "$SRC" -maxdepth 4 -name Chart.yaml) 2>/dev/null | head -n 1)
if [[ -n "$op_chart" ]]; then
  rm -rf ".stage/src/gpu-operator-$GPU_OPERATOR_VERSION"
  mkdir -p ".stage/src/gpu-operator-$GPU_OPERATOR_VERSION"
  cp -r "$(dirname "$op_chart")" ".stage/src/gpu-operator-$GPU_OPERATOR_VERSION/chart"
fi
chart=$(find "$SRC" -maxdepth 5 -path "*k8s-device-plugin-$NVIDIA_DEVICE_PLUGIN_VERSION/deployments/helm/nvidia-device-plugin" | head -n 1)
rm -rf ".stage/src/k8s-device-plugin-$NVIDIA_DEVICE_PLUGIN_VERSION"
mkdir -p ".stage/src/k8s-device-plugin-$NVIDIA_DEVICE_PLUGIN_VERSION/deployments/helm"
cp -r "$chart" ".stage/src/k8s-device-plugin-$NVIDIA_DEVICE_PLUGIN_VERSION/deployments/helm/"
du -sh .stage/*
