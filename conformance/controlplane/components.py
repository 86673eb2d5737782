"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and the KWOK controller, started as local processes.

Every process is started here, recorded by PID in the cluster folder, and stopped by PID:
``down`` never kills anything it did not start. A component that fails to come up stops the
ones already started and raises :class:`ComponentFailed` with the tail of its log.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from conformance.binaries import binaries
from conformance.cluster.waits import wait_for_process
from conformance.common import processes
from conformance.common.console import Progress
from conformance.common.errors import ComponentFailed, UsageError
from conformance.controlplane import karpenter, kueue, metrics_adapter
from conformance.controlplane.kubeconfig import kubeconfig
from conformance.controlplane.pki import ClusterPKI
from conformance.controlplane.statefile import STATE_FILE, StateFile

# Each component must answer its health endpoint within this long. The API server is the
# slowest (it installs its built-in objects and RBAC roles); 60 s leaves room on 2 loaded cores.
COMPONENT_READY_TIMEOUT_S = 60.0
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# a component's extra ports are named "<component>-..."; Kueue's, Karpenter's and the metrics
# adapter's are picked with the others (cheap) and used by the profiles that run them
# (conformance/sim/kueue.py, karpenter.py and metrics_adapter.py start them)
PORT_NAMES = (*COMPONENTS, "etcd-peer", *kueue.PORT_NAMES, *karpenter.PORT_NAMES,
              *metrics_adapter.PORT_NAMES)
# A component's port is picked seconds before it listens. The kernel numbers outgoing
# connections from its ephemeral range, so a port picked there can be taken meanwhile (CI saw
# kwok fail with "address already in use"); ports just below that range are only taken by
# listeners. A port lost anyway (another sim starting at once) is picked again.
PORT_WINDOW = 10000  # ports tried below the ephemeral range
PORT_ATTEMPTS = 3
SERVICE_CIDR = "10.96.0.0/16"
# The ``kubernetes`` Service's cluster IP (the range's first address): a real node's pods reach
# the API server there (conformance/node/relay.py), so the serving certificate names it too.
KUBERNETES_SERVICE_IP = "10.96.0.1"
# Every component is a Go program: its garbage collector runs once the heap grew by GOGC %
# (Go's default 100). Measured on a healthy sim over default suite runs: at 400 the API server
# spent ~10 % less CPU a run (1.30-1.46 s against 1.49-1.63 s), etcd and the controller manager
# likewise, for ~330 MB more resident memory a sim (the API server 522 MB against 297).
# GOGC in the caller's environment wins.
GO_GC_PERCENT = "400"
# And each runs its Go code on one OS thread at a time (GOMAXPROCS=1; Go's default is one per
# core). A sim is a small cluster, often one of several on a machine: with a P per core its
# idle Go runtimes spun looking for work to steal and marked the heap on a second core.
# Measured on the 2-core machine, one healthy sim, A/B twice: `sim up` 3.4-3.5 CPU-s against
# 4.6-5.0, idle 2.6-2.7 % of a core against 3.4-3.6, four default suite runs 7.0-7.8 CPU-s
# in the sim's processes against 9.3-9.8, in the same wall time (16.7-17.3 s against
# 17.7-19.0). GOMAXPROCS in the caller's environment wins.
GO_MAX_PROCS = "1"
# The HPA controller's period (upstream default 15 s): the pod-autoscaling checks see a scale
# within a few periods; 2 s keeps them short and costs nothing where no HPA exists.
HPA_SYNC_PERIOD = "2s"
# The aggregation layer's front proxy, as kubeadm sets it up: its own CA, and the client
# certificate the API server presents to aggregated API servers (the metrics adapter).
FRONT_PROXY_CLIENT = "front-proxy-client"
FRONT_PROXY_CA = "gpuconf-sim-front-proxy-ca"  # not the clients' CA name: see pki.py
# A real kubelet's node carries this label from its registration on; KWOK leaves such nodes
# (and their pods) alone and manages every other node, as with --manage-all-nodes.
REAL_NODE_LABEL = "node.gpuconf.io/real"


def clusters_dir() -> Path:
    return binaries.cache_dir() / "clusters"


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux default


def _free_port(taken: Collection[int] = ()) -> int:
    """A free loopback port, below the ephemeral range when there is room there."""
    low = _ephemeral_low()
    if low - PORT_WINDOW >= 1024:  # leave the privileged ports alone
        for _ in range(200):
            port = random.randrange(low - PORT_WINDOW, low)
            if port not in taken and not port_in_use(port):
                return port
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            return port


def _free_ports(names: tuple[str, ...], fixed: dict[str, int]) -> dict[str, int]:
    ports = dict(fixed)
    for name in names:
        if name not in ports:
            ports[name] = _free_port(set(ports.values()))
    return ports


def _lost_its_port(error: ComponentFailed) -> bool:
    return "address already in use" in error.log_tail


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@dataclass
class ClusterState(StateFile):
    """What ``up`` wrote: enough for ``down``, ``status`` and restarting one component."""

    name: str
    folder: str
    kubernetes_version: str
    ports: dict[str, int]
    pids: dict[str, int] = field(default_factory=dict)
    binaries: dict[str, str] = field(default_factory=dict)
    started: float = 0.0
    profile: str | None = None

    @classmethod
    def root(cls) -> Path:
        return clusters_dir()

    @property
    def kubeconfig(self) -> Path:
        return Path(self.folder) / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"


class ControlPlane:
    """Start, stop and inspect one named local cluster."""

    def __init__(self, name: str = "gpuconf") -> None:
        if not name or not name.replace("-", "").isalnum() or len(name) > 40:
            raise UsageError(f"invalid cluster name {name!r}: use letters, digits and '-' "
                             "(at most 40)")
        self.name = name
        self.folder = clusters_dir() / name

    # ---- public -------------------------------------------------------------------------
    def state(self) -> ClusterState | None:
        return ClusterState.load(self.name)

    def up(self, *, apiserver_port: int | None = None, progress: Progress = print) -> ClusterState:
        existing = self.state()
        if existing and any(processes.pid_alive(p) for p in existing.pids.values()):
            raise UsageError(f"sim cluster {self.name!r} is already running "
                             f"(kubeconfig {existing.kubeconfig}); `gpuconf sim down` first")
        if apiserver_port is not None and port_in_use(apiserver_port):
            raise UsageError(f"port {apiserver_port} is already in use on 127.0.0.1: pass "
                             "another --port or stop what listens there")
        bins = binaries.require()
        if self.folder.exists():
            shutil.rmtree(self.folder)
        (self.folder / "logs").mkdir(parents=True)
        ports = _free_ports(PORT_NAMES, {"kube-apiserver": apiserver_port} if apiserver_port
                            else {})
        state = ClusterState(
            name=self.name, folder=str(self.folder), kubernetes_version=bins.kubernetes_version,
            ports=ports, started=time.time(),
            binaries={
                "etcd": str(bins.etcd), "kube-apiserver": str(bins.kube_apiserver),
                "kube-controller-manager": str(bins.kube_controller_manager),
                "kube-scheduler": str(bins.kube_scheduler), "kwok": str(bins.kwok),
                "helm": str(bins.helm),
            },
        )
        progress(f"generating certificates in {self.folder / 'pki'}")
        self._write_pki(state)
        state.save()
        try:
            for component in COMPONENTS:
                self.start_on_a_free_port(state, component, apiserver_port is not None,
                                          progress)
        except BaseException:
            progress("start failed: stopping the components already started")
            self.down(progress=lambda _msg: None, keep_logs=True)
            raise
        return state

    def start_on_a_free_port(self, state: ClusterState, component: str, port_fixed: bool,
                             progress: Progress) -> None:
        """Start ``component``; when its port was taken meanwhile, pick another and retry (a
        component started later, as Kueue by a profile, too)."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self.start_component(state, component, progress=progress)
                return
            except ComponentFailed as error:
                fixed = port_fixed and component == "kube-apiserver"
                if attempt == PORT_ATTEMPTS or fixed or not _lost_its_port(error):
                    raise
                self.stop_component(state, component)  # reaps it and forgets its PID
                own = {n for n in state.ports if n == component or n.startswith(f"{component}-")}
                state.ports = _free_ports(PORT_NAMES, {n: p for n, p in state.ports.items()
                                                       if n not in own})
                progress(f"{component}: its port was taken meanwhile; retrying on "
                         f"{state.ports[component]}")
                if component == "kube-apiserver":
                    self._write_pki(state)  # the kubeconfigs name the API server's port
                state.save()

    def start_component(self, state: ClusterState, component: str, *,
                        progress: Progress = print) -> None:
        argv = self._argv(state, component)
        log_path = Path(state.folder) / "logs" / f"{component}.log"
        progress(f"starting {component}")
        t0 = time.monotonic()
        proc = processes.spawn(argv, log_path, env=self._env(state, component))
        state.pids[component] = proc.pid
        state.save()
        self._wait_healthy(state, component, proc, log_path)
        progress(f"{component} ready in {time.monotonic() - t0:.1f}s")

    @staticmethod
    def _env(state: ClusterState, component: str) -> dict[str, str]:
        own: dict[str, str] = {}
        if component == kueue.COMPONENT:
            own = kueue.env(Path(state.folder))
        elif component == karpenter.COMPONENT:
            own = karpenter.env(Path(state.folder))
        elif component == metrics_adapter.COMPONENT:
            own = metrics_adapter.env(state.ports, metrics_adapter.host_ip())
        return {"GOGC": os.environ.get("GOGC", GO_GC_PERCENT),
                "GOMAXPROCS": os.environ.get("GOMAXPROCS", GO_MAX_PROCS), **own}

    def stop_component(self, state: ClusterState, component: str) -> None:
        pid = state.pids.get(component)
        if pid is None:
            return
        processes.stop(pid, state.binaries.get(component, ""))
        state.pids.pop(component, None)
        state.save()

    def run_or_stop(self, state: ClusterState, component: str, want: bool,
                    binary: Callable[[], Path], progress: Progress) -> bool:
        """A component a profile runs (Kueue, Karpenter, the metrics adapter): started with
        ``binary()`` on free ports where ``want`` and it is not running, stopped where not
        ``want`` (its PID is the state's, so ``sim down`` stops it too). True when started."""
        pid = state.pids.get(component)
        if want and (pid is None or not processes.pid_alive(pid)):
            state.binaries[component] = str(binary())
            self.start_on_a_free_port(state, component, False, progress)
            return True
        if not want and pid is not None:
            progress(f"stopping {component}")
            self.stop_component(state, component)
        return False

    def down(self, *, progress: Progress = print, keep_logs: bool = False) -> bool:
        """Stop every recorded process (reverse start order) and remove the data.

        Returns False when there was no such cluster.
        """
        state = self.state()
        if state is None:
            if self.folder.exists() and not keep_logs:
                shutil.rmtree(self.folder, ignore_errors=True)
            return False
        for component in reversed(list(state.pids)):  # reverse start order, extras included
            progress(f"stopping {component} (pid {state.pids[component]})")
            self.stop_component(state, component)
        if keep_logs:
            shutil.rmtree(self.folder / "etcd-data", ignore_errors=True)
            (self.folder / STATE_FILE).unlink(missing_ok=True)
        else:
            shutil.rmtree(self.folder, ignore_errors=True)
        return True

    def status(self) -> dict:
        state = self.state()
        if state is None:
            return {"name": self.name, "running": False}
        components = {
            c: {"pid": pid, "running": processes.ours(pid, state.binaries[c])}
            for c, pid in state.pids.items()
        }
        return {
            "name": self.name, "running": all(v["running"] for v in components.values()),
            "kubeconfig": str(state.kubeconfig), "server": state.server,
            "kubernetes_version": state.kubernetes_version, "profile": state.profile,
            "components": components, "uptime_s": round(time.time() - state.started, 1),
        }

    # ---- internals ----------------------------------------------------------------------
    def _write_pki(self, state: ClusterState) -> None:
        pki = ClusterPKI(self.folder / "pki")
        pki.issue("apiserver", "kube-apiserver", server=True,
                  hosts=("127.0.0.1", KUBERNETES_SERVICE_IP, "localhost", "kubernetes",
                         "kubernetes.default", "kubernetes.default.svc",
                         "kubernetes.default.svc.cluster.local"))
        pki.issue("etcd-client", "kube-apiserver-etcd-client", client=True)
        # the API server's identity towards a real kubelet (logs, exec), as kubeadm issues it
        pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                  org="system:masters", client=True)
        pki.service_account_keys()
        front_proxy = ClusterPKI(self.folder / "pki" / "front-proxy", FRONT_PROXY_CA)
        front_proxy.issue(FRONT_PROXY_CLIENT, FRONT_PROXY_CLIENT, client=True)
        users = {
            "admin": ("kubernetes-admin", "system:masters"),
            "controller-manager": ("system:kube-controller-manager", None),
            "scheduler": ("system:kube-scheduler", None),
            "kwok": ("gpuconf-kwok", "system:masters"),
            kueue.COMPONENT: (kueue.USER, "system:masters"),
            metrics_adapter.COMPONENT: (metrics_adapter.USER, "system:masters"),
            karpenter.COMPONENT: (karpenter.USER, "system:masters"),
        }
        pki.issue(kueue.WEBHOOK_CERT, kueue.USER, server=True, hosts=("127.0.0.1", "localhost"))
        pki.issue(metrics_adapter.SERVING_CERT, metrics_adapter.USER, server=True,
                  hosts=metrics_adapter.serving_hosts())
        for name, (cn, org) in users.items():
            pair = pki.issue(name, cn, org=org, client=True)
            target = self.folder / ("kubeconfig" if name == "admin" else f"{name}.kubeconfig")
            target.write_text(kubeconfig(state.server, pki.ca.cert, cn, cert=pair.cert,
                                          key=pair.key))
            target.chmod(0o600)

    def _argv(self, state: ClusterState, component: str) -> list[str]:
        f = Path(state.folder)
        pki = f / "pki"
        p = state.ports
        binary = state.binaries[component]
        if component == "etcd":
            return [binary, "--name=gpuconf", f"--data-dir={f / 'etcd-data'}",
                    f"--listen-client-urls=http://127.0.0.1:{p['etcd']}",
                    f"--advertise-client-urls=http://127.0.0.1:{p['etcd']}",
                    f"--listen-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
                    f"--initial-cluster=gpuconf=http://127.0.0.1:{p['etcd-peer']}",
                    "--unsafe-no-fsync=true",  # a throw-away cluster: speed over durability
                    "--quota-backend-bytes=4294967296", "--log-level=warn"]
        if component == "kube-apiserver":
            return [binary, f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                    "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                    f"--secure-port={p['kube-apiserver']}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}",
                    f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--client-ca-file={pki / 'ca.crt'}",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    "--authorization-mode=Node,RBAC",
                    # as managed node pools run it (GKE, AKS): a pod asking for
                    # nvidia.com/gpu tolerates a taint of that name without saying so
                    "--enable-admission-plugins=ExtendedResourceToleration",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    # a real kubelet joins with a bootstrap token and is reached at its IP
                    "--enable-bootstrap-token-auth=true",
                    f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                    f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                    "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
                    "--endpoint-reconciler-type=none",  # loopback cannot be an endpoint IP
                    # the aggregation layer (an aggregated API: the metrics adapter), reached
                    # at its endpoints: there is no kube-proxy for a Service's cluster IP
                    f"--requestheader-client-ca-file={pki / 'front-proxy' / 'ca.crt'}",
                    f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                    "--requestheader-username-headers=X-Remote-User",
                    "--requestheader-group-headers=X-Remote-Group",
                    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                    f"--proxy-client-cert-file={pki / 'front-proxy' / f'{FRONT_PROXY_CLIENT}.crt'}",
                    f"--proxy-client-key-file={pki / 'front-proxy' / f'{FRONT_PROXY_CLIENT}.key'}",
                    "--enable-aggregator-routing=true",
                    "--allow-privileged=true", "--event-ttl=1h", "--v=1"]
        if component in ("kube-controller-manager", "kube-scheduler"):
            kc = f / ("controller-manager.kubeconfig" if component == "kube-controller-manager"
                      else "scheduler.kubeconfig")
            common = [binary, f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
                      f"--authorization-kubeconfig={kc}", "--bind-address=127.0.0.1",
                      f"--secure-port={p[component]}", "--leader-elect=false", "--v=1"]
            if component == "kube-scheduler":
                return [*common, "--kube-api-qps=300", "--kube-api-burst=600"]
            return [*common, f"--root-ca-file={pki / 'ca.crt'}",
                    f"--service-account-private-key-file={pki / 'sa.key'}",
                    "--use-service-account-credentials=true",
                    f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                    f"--cluster-signing-key-file={pki / 'ca.key'}",
                    "--concurrent-daemonset-syncs=5",
                    # 500-node profiles mean thousands of operand pods: lift the client limits
                    "--kube-api-qps=300", "--kube-api-burst=600",
                    # KWOK postpones a node's heartbeat whenever the node object changes (each
                    # fault the stand-in writes); simulated nodes must not age out meanwhile.
                    "--node-monitor-grace-period=3600s",
                    f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD}"]
        if component == kueue.COMPONENT:
            return kueue.argv(binary, f, p)
        if component == metrics_adapter.COMPONENT:
            return metrics_adapter.argv(binary, f, p, metrics_adapter.host_ip())
        if component == karpenter.COMPONENT:
            return karpenter.argv(binary, f, p)
        if component == "kwok":
            return [binary, f"--kubeconfig={f / 'kwok.kubeconfig'}",
                    f"--config={Path(__file__).with_name('kwok-stages.yaml')}",
                    f"--manage-nodes-with-label-selector=!{REAL_NODE_LABEL}",
                    f"--server-address=127.0.0.1:{p['kwok']}",
                    "--node-ip=127.0.0.1", "--cidr=10.0.0.0/16", "--v=4"]
        raise ValueError(component)

    def _health_check(self, state: ClusterState, component: str) -> bool:
        p = state.ports
        pki = Path(state.folder) / "pki"
        if component == "etcd":
            url, ctx = f"http://127.0.0.1:{p['etcd']}/health", None
        elif component == "kwok":
            url, ctx = f"http://127.0.0.1:{p['kwok']}/healthz", None
        elif component == kueue.COMPONENT:
            url, ctx = kueue.ready_url(p), None
        elif component == metrics_adapter.COMPONENT:
            url = metrics_adapter.ready_url(p, metrics_adapter.host_ip())
            ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        elif component == karpenter.COMPONENT:
            url, ctx = karpenter.ready_url(p), None
        else:
            port = p[component]
            url = f"https://127.0.0.1:{port}/" + ("readyz" if component == "kube-apiserver"
                                                  else "healthz")
            ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            if component == "kube-apiserver":
                ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
            else:  # scheduler/kcm serve self-signed certs
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False

    def _wait_healthy(self, state: ClusterState, component: str, proc: subprocess.Popen,
                      log_path: Path) -> None:
        wait_for_process(component, proc, log_path,
                         lambda: self._health_check(state, component),
                         timeout=COMPONENT_READY_TIMEOUT_S, what="healthy")

