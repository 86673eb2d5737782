#!/usr/bin/env bash
# One call on the workplace's H200 machine (the device tool): the solo kernels in the sustained
# and the burst regime with GEMM timelines, GEMM interference over a longer window, and the main
# job on the local GPU (`gpuconf run --target local`). Everything lands in $OUT as at most
# 8 files (the tool brings back 8). The suite needs the wheels the image lacks in .whl/
# (reports/evidence/README.md gives the pip download line); the kernels need only CuPy.
set -uo pipefail
OUT=${OUT:-/tmp/gpuconf-evidence}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm,temperature.gpu \
    --format=csv
  echo "== kernels: sustained and burst"
  python3 -m gpu_kernels.device_evidence --only kernels --skip-tune --prefix h200 \
    --out /tmp/kernels --budget-s 200
  cp /tmp/kernels/h200-kernels.json /tmp/kernels/run-log.txt "$OUT"/
  echo "== gemm interference, 8 s window"
  python3 -m gpu_kernels interference --kernel gemm --copies 1,2,4,8 --seconds 8 \
    --gemm-backend cublas --gemm-size 8192 --json > "$OUT/h200-interference-gemm-8s.json"
  python3 - "$OUT/h200-interference-gemm-8s.json" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["points"]:
    print(p["copies"], p.get("aggregate_vs_solo"), p.get("jain"), p.get("cv_max"), p["verdict"])
PY
  echo "== gpuconf run --target local"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl \
  && python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
    --target /tmp/site . \
  && PYTHONPATH=/tmp/site python3 -m conformance.cli run --target local --suite stack \
    --suite sharing --results /tmp/local --expected-driver-version "$(nvidia-smi \
    --query-gpu=driver_version --format=csv,noheader | head -1)"
  echo "gpuconf run exit code: $?"
  tar -czf "$OUT/local-run.tar.gz" -C /tmp local
} 2>&1 | tee "$OUT/console.txt"
