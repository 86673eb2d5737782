"""Configuration files of the node's components, written into the node folder.

Everything a component would put in a system path by default (containerd's root, the CNI
config and its IP allocations, the network namespaces, the NVIDIA runtime's config) is pointed
into the node's own folders, so that ``down`` finds it there. What must stay at a fixed place
is listed in ``state.HOST_PATHS``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from conformance.controlplane.kubeconfig import kubeconfig

BRIDGE = "gpuconf0"
POD_CIDR = "10.244.0.0/24"
NODE_IP = "10.244.0.1"  # the bridge's own address: the node's InternalIP and the pods' gateway
CDI_RUN_DIR = "/var/run/cdi"  # where the device plugin's chart writes its CDI spec (hostPath)
RUNTIME_CLASS = "nvidia"  # the NVIDIA DaemonSets run through nvidia-container-runtime (CDI mode)
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10.1"
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
# A crash-looping container is started again after 10 s, 20 s, 40 s ... up to 5 min by
# default; the node's kubelet caps that at 5 s (crashLoopBackOff.maxContainerRestartPeriod,
# KubeletCrashLoopBackOffMax: beta and on since 1.35), so an operand that crash-loops shows it
# within seconds, not half a minute
CRASH_LOOP_BACKOFF_MAX = "5s"


@dataclass(frozen=True)
class Paths:
    """The node's files, derived from its folder and run dir."""

    folder: Path
    run_dir: Path

    @property
    def containerd_config(self) -> Path:
        return self.folder / "containerd.toml"

    @property
    def containerd_root(self) -> Path:
        return self.folder / "containerd"

    @property
    def containerd_state(self) -> Path:
        return self.run_dir / "containerd"

    @property
    def socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.folder / "cni" / "net.d"

    @property
    def cni_data_dir(self) -> Path:
        return self.folder / "cni" / "networks"

    @property
    def cdi_dir(self) -> Path:
        """The spec nvidia-ctk generates for the NVIDIA runtime (management: all GPUs)."""
        return self.folder / "cdi"

    @property
    def nvidia_runtime_config(self) -> Path:
        return self.folder / "nvidia-container-runtime.toml"

    @property
    def kubelet_config(self) -> Path:
        return self.folder / "kubelet.yaml"

    @property
    def kubelet_pki(self) -> Path:
        return self.folder / "kubelet-pki"

    @property
    def bootstrap_kubeconfig(self) -> Path:
        return self.folder / "bootstrap.kubeconfig"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.folder / "kubelet.kubeconfig"

    @property
    def resolv_conf(self) -> Path:
        return self.folder / "resolv.conf"


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def containerd_toml(p: Paths, *, runc: Path, nvidia_runtime: Path | None, cni_bin: Path,
                    snapshotter: str, restrict_oom_score_adj: bool,
                    default_runtime: str = "runc") -> str:
    """containerd 2.4, config version 3 (it reads 3; its own is 4). CDI is always on in 2.x."""
    q = _toml_str
    runtimes = f"""
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = {q(str(runc))}
          Root = {q(str(p.run_dir / "runc"))}
          SystemdCgroup = false
"""
    if nvidia_runtime is not None:
        runtimes += f"""
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{RUNTIME_CLASS}]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{RUNTIME_CLASS}.options]
          BinaryName = {q(str(nvidia_runtime))}
          Root = {q(str(p.run_dir / "runc"))}
          SystemdCgroup = false
"""
    return f"""# written by gpuconf node up
version = 3
root = {q(str(p.containerd_root))}
state = {q(str(p.containerd_state))}
# NRI would open a socket under /var/run/nri; nothing here uses it
disabled_plugins = ['io.containerd.nri.v1.nri']

[grpc]
  address = {q(str(p.socket))}

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = {q(str(p.folder / "opt"))}

  # shim sockets and runc's state default to /run/containerd: kept in the node's run dir
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = {q(str(p.run_dir / "s"))}

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = '{snapshotter}'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '{SANDBOX_IMAGE}'

  [plugins.'io.containerd.cri.v1.runtime']
    cdi_spec_dirs = [{q(str(p.cdi_dir))}, '{CDI_RUN_DIR}']
    # root here lacks CAP_SYS_RESOURCE: lowering a sandbox's oom_score_adj would be refused
    restrict_oom_score_adj = {str(restrict_oom_score_adj).lower()}
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = '{default_runtime}'
{runtimes}
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [{q(str(cni_bin))}]
      conf_dir = {q(str(p.cni_conf_dir))}

  [plugins.'io.containerd.transfer.v1.local']
    [[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
      platform = 'linux/amd64'
      snapshotter = '{snapshotter}'
"""


def cni_conflist(p: Paths) -> str:
    """bridge + host-local; containerd runs the loopback plugin itself. No iptables on either
    machine, so no masquerade and no portmap (pods reach the host, the host reaches pods)."""
    return json.dumps({
        "cniVersion": "1.0.0",
        "name": "gpuconf",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": True,
            "ipMasq": False,
            "hairpinMode": True,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": str(p.cni_data_dir),
            },
        }],
    }, indent=2)


def nvidia_runtime_toml(p: Paths, *, runc: Path, nvidia_ctk: Path) -> str:
    """nvidia-container-runtime in CDI mode: a container asking for NVIDIA_VISIBLE_DEVICES (the
    NVIDIA DaemonSets, through RuntimeClass ``nvidia``) gets the devices of the spec nvidia-ctk
    generated; then plain runc runs it. Read through NVIDIA_CTK_CONFIG_FILE_PATH, not /etc."""
    q = _toml_str
    return f"""# written by gpuconf node up
[nvidia-container-runtime]
log-level = "info"
mode = "cdi"
runtimes = [{q(str(runc))}]

[nvidia-container-runtime.modes.cdi]
default-kind = "nvidia.com/gpu"
annotation-prefixes = ["cdi.k8s.io/"]
spec-dirs = [{q(str(p.cdi_dir))}]

[nvidia-ctk]
path = {q(str(nvidia_ctk))}
"""


def kubelet_yaml(p: Paths, *, cgroup: str, oom_score_adj: int, ca: Path) -> str:
    """KubeletConfiguration. Nothing can be pulled here: images are imported and pinned, image
    GC is off and the eviction thresholds are tiny (a full disk must not evict the node's own
    DaemonSets). Authentication by client certificate (the API server's kubelet client) and
    webhook; authorization by webhook (SubjectAccessReview), as kubeadm sets it up."""
    lines = [
        "apiVersion: kubelet.config.k8s.io/v1beta1",
        "kind: KubeletConfiguration",
        f"address: {NODE_IP}",
        f"port: {KUBELET_PORT}",
        "readOnlyPort: 0",
        "healthzBindAddress: 127.0.0.1",
        f"healthzPort: {KUBELET_HEALTHZ_PORT}",
        "cgroupDriver: cgroupfs",  # no systemd on either machine (PID 1 is not systemd)
        "failSwapOn: false",
        f"oomScoreAdj: {oom_score_adj}",
        f"containerRuntimeEndpoint: unix://{p.socket}",
        f"resolvConf: {p.resolv_conf}",
        "serializeImagePulls: false",
        "imageGCHighThresholdPercent: 100",
        "imageGCLowThresholdPercent: 99",
        "evictionHard:",
        '  memory.available: "1Mi"',
        '  nodefs.available: "1%"',
        '  imagefs.available: "1%"',
        '  nodefs.inodesFree: "1%"',
        "rotateCertificates: true",
        "crashLoopBackOff:",
        f"  maxContainerRestartPeriod: {CRASH_LOOP_BACKOFF_MAX}",
        "authentication:",
        "  anonymous:",
        "    enabled: false",
        "  webhook:",
        "    enabled: true",
        "  x509:",
        f"    clientCAFile: {ca}",
        "authorization:",
        "  mode: Webhook",
    ]
    if cgroup == "v1":
        lines.append("failCgroupV1: false  # kubelet 1.36 refuses cgroup v1 unless told otherwise")
    return "\n".join(lines) + "\n"


def bootstrap_kubeconfig(server: str, ca: Path, token: str) -> str:
    """The kubelet's kubeconfig for TLS bootstrapping: the bootstrap token as its user."""
    return kubeconfig(server, ca, "kubelet-bootstrap", token=token, cluster="gpuconf",
                      context="bootstrap")
