#!/usr/bin/env bash
# One call on the workplace's H200 machine (the device tool), for issue 19's kernel side:
#   1. burn-in at the power limit (60 s, NVML every 0.5 s, XID/ECC deltas);
#   2. the same with an injected bit flip, which must be caught (the run must fail);
#   3. FP64: DGEMM (tensor cores) and the FP64 FMA chains, against the datasheet;
#   4. tail latency of a batch-1 inference client: solo, beside 1/2/4/8 time-sliced GEMM
#      sharers, and beside 1/2/4/8 under MPS.
# Writes at most 8 files to $OUT (the tool brings back 8): one JSON result per step and the
# console. Needs only what the machine's python3 has (CuPy 14, nvidia-ml-py, ml_dtypes).
# Never touches clocks, power limit, compute mode, MIG or persistence; never resets the GPU.
# A dry run without a GPU (plumbing only): PYTHONPATH=tests/unit/fakes SMALL=1 BURN_S=2
# INJECT_S=2 KERNEL_S=0.5 LATENCY_S=1 OUT=/tmp/dry bash ci/device/h200-certification-kernels.sh
set -uo pipefail
OUT=${OUT:-/tmp/gpuconf-certification}
DATE=${DATE:-2026-12-03}
BUDGET_S=${BUDGET_S:-400}  # the whole script; the latency step gets what is left
BURN_S=${BURN_S:-60} INJECT_S=${INJECT_S:-10} KERNEL_S=${KERNEL_S:-5} LATENCY_S=${LATENCY_S:-8}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
if [ -n "${SMALL:-}" ]; then  # sizes the CPU stand-ins of tests/unit/fakes can run
  BURN_SIZES=(--gemm-dtype fp16 --gemm-size 256 --membw-mib 4)
  DGEMM_SIZE=256 FMA_SIZES=(--launch-ms 1)
  LATENCY_SIZES=(--gemm-dtype fp16 --gemm-size 128 --infer-hidden 256 --infer-layers 2)
else
  BURN_SIZES=() DGEMM_SIZE=8192 FMA_SIZES=()
  LATENCY_SIZES=(--gemm-dtype bf16 --gemm-size 8192)
fi

step() {  # step NAME TIMEOUT_S ARGS...: one gpu_kernels result into $OUT/h200-NAME-DATE.json
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit} s): python3 -m gpu_kernels $*"
  local start=$SECONDS
  timeout --kill-after=10 "$limit" $PY -m gpu_kernels "$@" --json \
    > "$OUT/h200-$name-$DATE.json" 2> "/tmp/$name.stderr"
  local rc=$?
  echo "-- $name: rc=$rc in $((SECONDS - start)) s"
  tail -n 5 "/tmp/$name.stderr"
}

{
  nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,enforced.power.limit,clocks.max.sm,temperature.gpu,ecc.mode.current,compute_mode,mig.mode.current \
    --format=csv
  $PY -c 'import cupy, pynvml; print("cupy", cupy.__version__, "nvidia-ml-py ok")'
  step burn 150 burn --seconds "$BURN_S" "${BURN_SIZES[@]}"
  step burn-injected 90 burn --seconds "$INJECT_S" --inject-corruption "${BURN_SIZES[@]}"
  step fp64-dgemm 60 gemm --dtype fp64 --size "$DGEMM_SIZE" --seconds "$KERNEL_S" --trials 10
  step fp64-fma 60 fp64 --seconds "$KERNEL_S" --trials 10 "${FMA_SIZES[@]}"
  left=$((BUDGET_S - SECONDS - 15))
  step latency "$left" latency --sharers 1,2,4,8 --mps-sharers 1,2,4,8 --stress gemm \
    --seconds "$LATENCY_S" "${LATENCY_SIZES[@]}"
  $PY - "$OUT" "$DATE" <<'PY'
import json, pathlib, sys
out, date = pathlib.Path(sys.argv[1]), sys.argv[2]
def load(name):
    try:
        return json.loads((out / f"h200-{name}-{date}.json").read_text())
    except Exception as exc:
        print(f"{name}: no result ({exc})")
        return None
for name in ("burn", "burn-injected"):
    r = load(name)
    if r and "gpus" in r:
        for g in r["gpus"]:
            p = g["power"]
            print(f"{name}: {r['verdict']} exit {r['exit_code']} GPU {g['uuid']} "
                  f"{g['iterations']} it, errors {g['errors'].get('iterations')}, power median "
                  f"{p['median_w']} W = {p['fraction_of_limit']} of {p['limit_w']} W, "
                  f"SM {g['sm_clock_mhz']}, T {g['temperature_c']}, throttle "
                  f"{g['throttle']['reasons']}, XID {g['xid']}, ECC {g['health']['ecc_delta']}, "
                  f"gemm {g['throughput']['gemm_tflops']} TFLOP/s, membw "
                  f"{g['throughput']['membw_tbs']} TB/s; injected {g['injected']}")
    elif r:
        print(name, r.get("error"))
for name in ("fp64-dgemm", "fp64-fma"):
    r = load(name)
    if r and "median" in r:
        print(f"{name}: median {r['median']:.2f} {r['unit']} cv {r['cv']:.4f} peak_ratio "
              f"{r['peak_ratio']:.3f} bar {r['bar']} met {r['met']} check "
              f"{r['correctness']['ok']} {r['correctness'].get('max_rel_err')}; SM "
              f"{[s.get('sm_clock_mhz_mean') for s in r['samples']]} W "
              f"{[s.get('power_w_mean') for s in r['samples']]}")
    elif r:
        print(name, r.get("error"))
r = load("latency")
if r and "points" in r:
    for p in r["points"]:
        lat = p.get("latency_us") or {}
        print(f"latency {p['mode']:>12} N={p['sharers']}: n={p['n']} p50 {lat.get('p50')} "
              f"p99 {lat.get('p99')} p99.9 {lat.get('p999')} us slowdown {p.get('slowdown')} "
              f"q {p.get('implied_quantum_ms')} sharers {p.get('sharer_rates')} "
              f"ok {p.get('client_correct')}/{p.get('sharers_correct')} {p.get('error') or ''}")
    print(r["finding"])
elif r:
    print("latency", r.get("error"))
PY
  nvidia-smi --query-gpu=power.draw,clocks.sm,temperature.gpu,ecc.errors.uncorrected.volatile.total \
    --format=csv
  dmesg 2>/dev/null | grep -i xid | tail -5
  for f in /tmp/{burn,burn-injected,fp64-dgemm,fp64-fma,latency}.stderr; do
    echo "=== $f"; tail -c 20000 "$f"
  done > "$OUT/h200-certification-stderr-$DATE.txt" 2>&1
  echo "total ${SECONDS} s"
} 2>&1 | tee "$OUT/h200-certification-console-$DATE.txt"
