#!/usr/bin/env bash
# The real node on the workplace's H200 machine (the device tool), issue 16, in as few calls as
# the 64 MiB a call carries allow. The control plane, the node and the NVIDIA parts are ~750 MB
# of binaries: two solid xz archives (ci/device/stage-node.sh makes them) of < 45 MiB each.
#
#   stage   call 1: unpack .stage/stage1.tar.xz into the binary cache, install the Python
#           wheels it carries (.whl/1) into /tmp/site, write a manifest (what stage 1 left,
#           with checksums); the next call carries the rest of the wheels (.whl/2): 64 MiB a
#           call does not hold stage 1 and all of them (reports/evidence/README.md)
#   run     call 2 (at once: the machine stays ~30 s): verify what stage 1 left (one line
#           saying it is gone otherwise), unpack stage 2, bring the node up on the real driver
#           (/usr/local/nvidia, devices in /), build the CuPy workload image from this host's
#           python3 and import it, run stack, scheduling, sharing and operations against it
#   sliced  call 3: pods sharing one GPU through the product: for each of SLICED_REPLICAS
#           (default 4), the device plugin time-sliced that many ways, then `gpuconf run
#           --target node --suite sharing` (SLICED_REQUIREMENTS="ID ..." keeps those): N pods,
#           each holding one slice, on the one GPU, against the same copies as processes in one
#           pod (conformance/cluster/sharing_pods.py); results-r<R>.json, report-r<R>.md and
#           evidence-r<R>.tgz per replicas (two values a call at most: 8 files come back)
#   stage2  (for operator) call 2: verify stage 1, unpack stage 2 (the two archives and the
#           operator's do not fit one call)
#   operator call 3: unpack .stage/operator.tar.xz (the GPU Operator built from source), node
#           up, the workload image, `gpuconf node operator` with the staged chart (with
#           OPERATOR_REPLICAS=R: time-slicing R through its ClusterPolicy, as NVIDIA documents),
#           then the suites of OPERATOR_SUITES (default "stack scheduling"; DISRUPTIVE=1 adds
#           --disruptive, OPERATOR_REQUIREMENTS="ID ..." keeps those; NO_WORKLOAD_IMAGE=1
#           skips the CuPy image, ~90 s) with the operator running the node
#   mps-limits one call, nothing staged: the device plugin's per-replica MPS defaults on a
#           private MPS daemon (compute mode untouched): memory and fault isolation, fp32 and
#           membw with R clients (MPS_REPLICAS, default 2)
#
# Each call writes at most 8 files into $OUT as it goes (a later failing step keeps what the
# earlier ones wrote). The node is left up between calls (its processes have sessions of their
# own); `run` and `sliced` bring it up when it is gone. Never touches the GPU's clocks, power
# limit, compute mode, MIG layout or persistence; never resets it.
#
# A dry run without a GPU (the mock NVML laid out as the H200's driver and dev roots, CuPy's CPU
# stand-in): ci/device/dry-run-node.sh
set -uo pipefail
MODE=${1:?usage: h200-node.sh stage|run|sliced|stage2|operator|mps-limits}
OUT=${OUT:-/tmp/gpuconf-node-out}
DATE=${DATE:-2026-12-03}
NAME=${NODE_NAME:-h200}
DRIVER_ROOT=${DRIVER_ROOT:-/usr/local/nvidia}
DEV_ROOT=${DEV_ROOT:-/}
BUDGET_S=${BUDGET_S:-570}  # the whole call (the tool's limit is 600 s)
PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
CACHE=${GPUCONF_CACHE:-$HOME/.cache/gpu-conformance}
STAGE=.stage
WHEELS=${WHEELS:-.whl}  # cp312 wheels of what the machine's python3 lacks (README: Notes)
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH="${EXTRA_PYTHONPATH:+$EXTRA_PYTHONPATH:}$SITE:$PWD"
export GPUCONF_CACHE="$CACHE"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LOG="$OUT/console-$MODE.txt"
exec > >(tee -a "$LOG") 2>&1
START=$SECONDS
left() { echo $((BUDGET_S - (SECONDS - START))); }
say() { echo "[h200-node $(date +%H:%M:%S) +$((SECONDS - START))s] $*"; }
gpuconf() { "$PY" -m conformance.cli "$@"; }
KUBECONFIG_NODE="$CACHE/clusters/$NAME/kubeconfig"

unpack() {  # unpack ARCHIVE: into the cache's bin folder, and a manifest of what it holds
  local archive=$1 name
  name=$(basename "$archive" .tar.xz)
  mkdir -p "$CACHE/bin"
  unxz "$archive" | tar -xv -C "$CACHE/bin" | grep -v '/$' | sort > "$CACHE/bin/.$name.files"
  (( PIPESTATUS[0] == 0 && PIPESTATUS[1] == 0 )) || return 1
  (cd "$CACHE/bin" && xargs -a ".$name.files" sha256sum > ".$name.sha256")
  sha256sum < "$archive" > "$CACHE/bin/.$name.archive"  # which archive they came from
  say "$name: $(wc -l < "$CACHE/bin/.$name.files") files unpacked into $CACHE/bin"
}

unxz() {  # unxz FILE: to stdout, with xz or, where it is missing, Python's lzma
  if command -v xz >/dev/null 2>&1; then xz -dc "$1"
  else "$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer, 1 << 20)' "$1"
  fi
}

stage_left() {  # stage_left NAME: 0 when the stage's files are all there, unchanged, and where
  # this call carries the stage's archive, unpacked from that very archive (not an older one)
  [[ -f "$CACHE/bin/.$1.sha256" ]] && (cd "$CACHE/bin" && sha256sum -c --quiet ".$1.sha256") \
    || return 1
  [[ -f "$STAGE/$1.tar.xz" ]] || return 0
  [[ "$(cat "$CACHE/bin/.$1.archive" 2>/dev/null)" == "$(sha256sum < "$STAGE/$1.tar.xz")" ]]
}

install_site() {  # the wheels this image lacks (split over calls: .whl/1 with stage, .whl/2
  # with the next, as 64 MiB a call cannot carry stage 1 and all of them), and the project's
  # pytest entry point; done once the suite's imports work
  if [[ -f "$SITE/.installed" ]]; then return 0; fi
  mkdir -p "$SITE"
  local wheels
  mapfile -t wheels < <(find "$WHEELS" -type f -name '*.whl' 2>/dev/null)
  if (( ${#wheels[@]} )); then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "${wheels[@]}" || return 1
  fi
  if ! "$PY" -c 'import kubernetes.client, pydantic, pytest, xdist, allure_pytest, yaml, cryptography' 2>/dev/null; then
    say "the suite's Python packages are not all here yet (carry the rest of .whl/ next)"
    return 1
  fi
  if "$PY" -c 'import importlib.metadata as m; m.distribution("gpu-conformance")' 2>/dev/null
  then touch "$SITE/.installed"; return 0; fi  # installed already (a dry run's venv)
  # the pytest11 entry point without building the package (this machine has no network)
  local dist="$SITE/gpu_conformance-0.1.0.dist-info"
  mkdir -p "$dist"
  printf 'Metadata-Version: 2.1\nName: gpu-conformance\nVersion: 0.1.0\n' > "$dist/METADATA"
  printf '[pytest11]\ngpu_conformance = conformance.plugin.hooks\n' > "$dist/entry_points.txt"
  touch "$SITE/.installed"
}

node_running() {
  gpuconf node status --name "$NAME" --json 2>/dev/null \
    | "$PY" -c 'import json, sys; sys.exit(0 if json.load(sys.stdin).get("running") else 1)'
}

node_up() {  # the node on the real driver, unless it is up already
  if node_running; then
    say "node $NAME is up (left by the previous call)"
    return 0
  fi
  say "bringing the node up on the driver in $DRIVER_ROOT (devices in $DEV_ROOT/dev)"
  timeout 240 "$PY" -m conformance.cli node up --name "$NAME" --driver-root "$DRIVER_ROOT" \
    --dev-root "$DEV_ROOT" --nvidia-src "$STAGE/src" ${GPU_INJECTION:+--gpu-injection "$GPU_INJECTION"} \
    ${CHART_VALUES:+--chart-values "$CHART_VALUES"}
}

save_node_logs() {  # the node's logs, the NVIDIA pods' logs and the CDI specs, one file
  local logs="$CACHE/nodes/$NAME/logs"
  { [[ -d "$logs" ]] && tail -n 40 "$logs"/*.log
    tail -n 60 /var/log/pods/nvidia-device-plugin_*/*/*.log
    ls -la /var/run/cdi /etc/cdi "$CACHE/nodes/$NAME" 2>&1
  } >> "$OUT/node-logs-$MODE.txt" 2>/dev/null
}

workload_image() {
  local ref_file=/tmp/gpuconf-workload-image.ref
  if [[ -s $ref_file ]] && gpuconf node status --name "$NAME" --json | grep -q "$(cat $ref_file)"; then
    cat $ref_file; return 0
  fi
  timeout 300 "$PY" -m conformance.cli node workload-image --name "$NAME" --python "$PY" \
    ${WORKLOAD_ARGS:-} | tail -n 1 > $ref_file || return 1
  cat $ref_file
}

gpu_pod_sees_a_device() {  # a one-GPU pod of IMAGE lists a /dev/nvidiaN: 0, else 1
  "$PY" - "$KUBECONFIG_NODE" "$1" <<'EOF'
import sys
from conformance.cluster import namespaces, workloads
from conformance.cluster.client import connect
from conformance.cluster.pods import PodSpec
PROBE = """
import os
print(sorted(os.listdir('/dev')))
try:
    import cupy
    print('cupy', cupy.__version__, cupy.cuda.runtime.getDeviceCount(), 'GPU(s)')
    k = cupy.RawKernel('extern "C" __global__ void f(float* x){x[threadIdx.x]*=2.0f;}', 'f')
    x = cupy.ones(32, dtype=cupy.float32)
    k((1,), (32,), (x,))
    print('a kernel compiled in the pod ran:', float(x.sum()), float(cupy.random.random(8).sum()) > 0)
except Exception as e:
    print('cupy fails in the pod:', repr(e)[:400])
"""
c = connect(sys.argv[1])
ns = namespaces.create_namespace(c, "gpu-probe", "h200-node")
try:
    r = workloads.run(c, ns, PodSpec("probe", gpus=1, image=sys.argv[2], command=[
        "python3", "-c", PROBE]), "h200-node",
        timeout=120)
    print(f"GPU probe pod: {r.phase} {r.diagnosis or ''} {r.logs.strip()[-500:]}")
    sys.exit(0 if r.phase == "Succeeded" and "nvidia0" in r.logs else 1)
finally:
    namespaces.delete_namespace(c, ns)
EOF
}

time_slicing_config() {  # time_slicing_config REPLICAS: a device plugin config file
  printf 'version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: %s\n' "$1"
}

time_sliced() {  # time_sliced REPLICAS: the plugin configured for time-slicing, once per value
  local replicas=$1 applied=/tmp/gpuconf-ts.replicas
  [[ $(cat $applied 2>/dev/null) == "$replicas" ]] && return 0
  { printf 'config:\n  default: default\n  map:\n    default: |\n'
    time_slicing_config "$replicas" | sed 's/^/      /'; } > /tmp/ts.yaml
  timeout 120 "$PY" -m conformance.cli node reconfigure --name "$NAME" --chart-values /tmp/ts.yaml \
    && echo "$replicas" > $applied
}

run_suites() {  # run_suites GPUCONF_RUN_ARGS...: the suites against the node with the workload
  # image $ref (when built); results, report, evidence and the node's status into $OUT
  local img=()
  [[ -n ${ref:-} ]] && img=(--workload-image "$ref" --cuda-image "$ref")
  # RESULTS_TAG (e.g. -r4) names this run's files apart from another run's in the same call
  local tag=${RESULTS_TAG:-}
  rm -rf /tmp/gpuconf-results
  timeout "$(( $(left) - 20 ))" "$PY" -m conformance.cli run --target node \
    --kubeconfig "$KUBECONFIG_NODE" "$@" "${img[@]}" --results /tmp/gpuconf-results
  say "suites: exit $?"
  cp /tmp/gpuconf-results/results.json "$OUT/results$tag.json" 2>/dev/null
  cp /tmp/gpuconf-results/report/report.md "$OUT/report$tag.md" 2>/dev/null
  (cd /tmp/gpuconf-results && tar -czf "$OUT/evidence$tag.tgz" evidence 2>/dev/null)
  gpuconf node status --name "$NAME" --json > "$OUT/node-status.json"
}

operator_state() {  # the ClusterPolicy, the operator's pods with their logs, the node's labels
  "$PY" - "$KUBECONFIG_NODE" <<'EOF'
import json, sys
from kubernetes import client, config
from conformance.node.operator import NAMESPACE
from conformance.nvidia import clusterpolicy
config.load_kube_config(sys.argv[1])
core = client.CoreV1Api()
for cp in client.CustomObjectsApi().list_cluster_custom_object(*clusterpolicy.API)["items"]:
    print("ClusterPolicy", cp["metadata"]["name"], json.dumps(cp.get("status")))
for p in core.list_namespaced_pod(NAMESPACE).items:
    print("pod", p.metadata.name, p.status.phase)
    for st in (p.status.init_container_statuses or []) + (p.status.container_statuses or []):
        print("  ", st.name, "ready" if st.ready else "", st.state.to_dict() if st.state else "")
        try:
            log = core.read_namespaced_pod_log(p.metadata.name, NAMESPACE, container=st.name, tail_lines=25)
            print("    " + log.replace("\n", "\n    ")[-3000:])
        except client.ApiException as e:
            print("    (no log:", e.reason, ")")
node = core.list_node().items[0]
print("labels", json.dumps({k: v for k, v in node.metadata.labels.items() if "nvidia" in k or "10de" in k}, indent=1))
print("allocatable", node.status.allocatable)
EOF
}

fingerprint() {
  { nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,compute_mode,mig.mode.current \
      --format=csv 2>&1 || true
    "$PY" -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 || true
    uname -r; stat -fc %T /sys/fs/cgroup; } | sed 's/^/  /'
}

case $MODE in
stage)
  say "stage 1: $(ls -la $STAGE/*.tar.xz 2>/dev/null | awk '{print $5, $9}' | tr '\n' ' ')"
  fingerprint
  unpack "$STAGE/stage1.tar.xz" || { say "stage 1 did not unpack"; exit 1; }
  install_site || say "the wheels are not complete yet: the next call carries the rest"
  ls -la "$CACHE/bin" > "$OUT/stage1-left.txt"
  say "stage 1 done: call 'run' now (the machine stays warm ~30 s)"
  ;;
run)
  if ! stage_left stage1; then
    say "stage 1 is gone (a fresh machine: the previous call's was given back): run 'stage' again, then 'run' at once"
    exit 2
  fi
  install_site || { say "the wheels did not install"; exit 1; }
  stage_left stage2 || unpack "$STAGE/stage2.tar.xz" || { say "stage 2 did not unpack"; exit 1; }
  fingerprint
  node_up || { say "node up failed"; save_node_logs; exit 1; }
  gpuconf node status --name "$NAME" --json > "$OUT/node-status.json"
  ref=$(workload_image) || { say "the workload image was not built"; save_node_logs; }
  say "workload image: ${ref:-none}"
  if [[ -n ${ref:-} ]] && ! gpu_pod_sees_a_device "$ref"; then
    # the plugin's own CDI spec did not give the pod its GPU: the GPU Operator's way instead
    say "a GPU pod got no device through the plugin's CDI spec: node up again with --gpu-injection runtime"
    save_node_logs
    gpuconf node down --name "$NAME"
    GPU_INJECTION=runtime node_up || { say "node up (runtime injection) failed"; save_node_logs; exit 1; }
    rm -f /tmp/gpuconf-workload-image.ref
    ref=$(workload_image) && gpu_pod_sees_a_device "$ref" || say "still no device in a GPU pod"
  fi
  run_suites --suite stack --suite scheduling --suite sharing --suite operations \
    --burn-seconds "${BURN_S:-10}"
  say "run done in $((SECONDS - START)) s"
  ;;
sliced)
  stage_left stage1 || { say "the binaries are gone: stage, then run (or sliced) at once"; exit 2; }
  install_site || { say "the wheels did not install (carry .whl/2)"; exit 1; }
  stage_left stage2 || unpack "$STAGE/stage2.tar.xz" || { say "stage 2 did not unpack (carry it)"; exit 1; }
  node_up || { say "node up failed"; save_node_logs; exit 1; }
  ref=$(workload_image) || { say "no workload image"; exit 1; }
  for replicas in ${SLICED_REPLICAS:-4}; do
    (( $(left) > 150 )) || { say "out of time before the pods on a GPU time-sliced $replicas ways"; break; }
    time_sliced "$replicas" || { say "time-slicing $replicas not applied"; save_node_logs; continue; }
    reqs=()
    for r in ${SLICED_REQUIREMENTS:-}; do reqs+=(--requirement "$r"); done
    RESULTS_TAG=-r$replicas run_suites --suite sharing "${reqs[@]}"
  done
  say "sliced done in $((SECONDS - START)) s"
  ;;
stage2)
  stage_left stage1 || { say "stage 1 is gone: stage, then stage2 and operator at once"; exit 2; }
  stage_left stage2 || unpack "$STAGE/stage2.tar.xz" || { say "stage 2 did not unpack (carry it)"; exit 1; }
  say "stage 2 done: call 'operator' now (the machine stays warm ~30 s)"
  ;;
operator)
  stage_left stage1 && stage_left stage2 \
    || { say "the binaries are gone: stage, stage2, then operator at once"; exit 2; }
  install_site || { say "the wheels did not install"; exit 1; }
  stage_left operator || unpack "$STAGE/operator.tar.xz" || { say "the operator did not unpack (carry .stage/operator.tar.xz)"; exit 1; }
  node_up || { say "node up failed"; save_node_logs; exit 1; }
  [[ -n ${NO_WORKLOAD_IMAGE:-} ]] || ref=$(workload_image) || say "no workload image"
  op_chart=$(ls -d "$STAGE"/src/gpu-operator-*/chart | tail -n 1)
  sharing=()
  if [[ -n ${OPERATOR_REPLICAS:-} ]]; then  # NVIDIA's time-slicing flow through the operator
    time_slicing_config "$OPERATOR_REPLICAS" > /tmp/op-ts.yaml
    sharing=(--sharing-config /tmp/op-ts.yaml)
  fi
  timeout 330 "$PY" -m conformance.cli node operator --name "$NAME" --chart "$op_chart" \
    "${sharing[@]}"
  rc=$?
  say "operator: exit $rc"
  operator_state > "$OUT/operator-state.txt" 2>&1
  (( rc == 0 )) || { save_node_logs; exit 1; }
  suites=()
  for s in ${OPERATOR_SUITES:-stack scheduling}; do suites+=(--suite "$s"); done
  [[ -n ${DISRUPTIVE:-} ]] && suites+=(--disruptive)
  for r in ${OPERATOR_REQUIREMENTS:-}; do suites+=(--requirement "$r"); done
  run_suites "${suites[@]}"
  say "operator done in $((SECONDS - START)) s"
  ;;
mps-limits)
  # One call, nothing staged: the per-client defaults the device plugin's MPS daemon sets for
  # sharing.mps with MPS_REPLICAS (default 2) replicas (pinned memory memory/R, threads 100/R %),
  # on a private MPS daemon with the compute mode untouched: does one client's memory limit
  # hold, does a fault still reach the other client, what do R clients get of solo
  # (MPS_STEPS: a subset of "memory fault fp32 membw", in that order)
  r=${MPS_REPLICAS:-2}
  fingerprint
  for step in ${MPS_STEPS:-memory fault fp32 membw}; do
    case $step in
      memory|fault) "$PY" -m gpu_kernels isolation --mode "$step" --mps-replicas "$r" --json \
                      > "$OUT/mps-r$r-isolation-$step.json" ;;
      *) "$PY" -m gpu_kernels interference --kernel "$step" --copies "1,$r" \
           --mps-replicas "$r" --json > "$OUT/mps-r$r-interference-$step.json" ;;
    esac
    say "MPS replicas $r, $step: exit $?"
  done
  ;;
*) echo "usage: h200-node.sh stage|run|sliced|stage2|operator|mps-limits" >&2; exit 2 ;;
esac
