"""Sweep kernel variants on this GPU and name the fastest correct one of each kind.

``python -m gpu_kernels.tune [--seconds S]`` prints one JSON line. One process, short runs
(the figures are for choosing, not for reporting: the chosen variant is then measured in
full). Like DCGM's memory_bandwidth plugin, which searches launch configurations.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from gpu_kernels import cuda, result, runner
from gpu_kernels.kernels import fp32, membw

GEMM_CANDIDATES: tuple[dict[str, Any], ...] = tuple(
    {"dtype": d, "backend": b, "size": s}
    for d in ("fp16", "bf16") for s in (8192, 16384) for b in ("matmul", "cublas"))


def candidates() -> list[tuple[str, dict[str, Any]]]:
    runs: list[tuple[str, dict[str, Any]]] = []
    runs += [("membw", {"variant": v}) for v in membw.VARIANTS]
    runs += [("fp32", {"variant": v}) for v in fp32.VARIANTS]
    runs += [("gemm", dict(c)) for c in GEMM_CANDIDATES]
    return runs


def _row(kind: str, options: Mapping[str, Any], res: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "options": dict(options), "median": res.get("median"),
            "cv": res.get("cv"), "unit": res.get("unit"),
            "correct": bool((res.get("correctness") or {}).get("ok")),
            "config": res.get("config")}


def best(rows: list[dict[str, Any]], kind: str, **match: Any) -> dict[str, Any] | None:
    """The fastest correct row of ``kind`` whose options contain ``match``."""
    ok = [r for r in rows if r["kind"] == kind and r["correct"] and r["median"] is not None
          and all(r["options"].get(k) == v for k, v in match.items())]
    return max(ok, key=lambda r: r["median"]) if ok else None


def sweep(seconds: float, trials: int) -> dict[str, Any]:
    cp = cuda.load()
    rows = []
    for kind, options in candidates():
        try:
            res = runner.run(kind, options, seconds=seconds, trials=trials,
                             warmup_seconds=0.3, no_bar=True)
            rows.append(_row(kind, options, res))
        except Exception as exc:  # a variant that does not compile or run here
            rows.append({"kind": kind, "options": options, "median": None, "correct": False,
                         "error": f"{type(exc).__name__}: {exc}"})
        cp.get_default_memory_pool().free_all_blocks()
    chosen = {"membw": best(rows, "membw"), "fp32": best(rows, "fp32"),
              "gemm-fp16": best(rows, "gemm", dtype="fp16"),
              "gemm-bf16": best(rows, "gemm", dtype="bf16")}
    out = result.header("tune")
    out.update({"seconds": seconds, "trials": trials, "rows": rows,
                "best": {k: (v["options"] if v else None) for k, v in chosen.items()},
                "ok": all(chosen.values()), "exit_code": 0 if all(chosen.values()) else 1})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_kernels.tune")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args(argv)
    return cuda.print_result("tune", lambda: sweep(args.seconds, args.trials))


if __name__ == "__main__":
    sys.exit(main())
