"""``python -m gpu_kernels KIND ... [--json]``: run one thing, print one result.

Exit codes: 0 passed; 1 a correctness check, bar or verdict failed (or the run crashed);
2 usage error (one line on stderr); 3 the check could not run here (no CuPy, no GPU, no
NVML, no MPS). With --json stdout holds exactly one JSON line, the result object.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from gpu_kernels import kernels, result
from gpu_kernels.kernels.base import Param

KINDS = (*kernels.STRESS_KINDS, "memhog", "fault", "inventory", "interference", "isolation",
         "latency", "burn")


class UsageError(Exception):
    """Arguments that parse but make no sense together."""


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exits 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"gpu_kernels: error: {message}\n")
        sys.exit(result.EXIT_USAGE)


def _positive(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _fraction(text: str) -> float:
    value = _positive(float)(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {text!r}")
    return value


def _int_list(text: str, minimum: int = 1) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") \
            from None
    if not values or any(v < minimum for v in values):
        raise argparse.ArgumentTypeError(f"need integers >= {minimum}: {text!r}")
    return values


def _devices(text: str) -> list[int] | None:
    """"all" (None: every GPU CUDA sees) or CUDA device indices."""
    return None if text.strip() == "all" else _int_list(text, minimum=0)


def _kind_list(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in kernels.STRESS_KINDS]
    if bad or len(values) < 2:
        raise argparse.ArgumentTypeError(
            f"--mix needs two or more of {', '.join(kernels.STRESS_KINDS)}: {text!r}")
    return values


def _add_params(p: argparse.ArgumentParser, params: Sequence[Param], prefix: str = "",
                defaults: dict[str, Any] | None = None) -> None:
    """One option per workload parameter; ``defaults`` overrides the parameters' own."""
    for param in params:
        flag = "--" + (prefix + param.name).replace("_", "-")
        default = (defaults or {}).get(param.name, param.default)
        p.add_argument(flag, dest=prefix.replace("-", "_") + param.name, type=param.type,
                       default=default, choices=param.choices,
                       help=f"{param.help} (default {default})".replace("%", "%%"))


def _params_of(args: argparse.Namespace, kind: str, prefix: str = "") -> dict[str, Any]:
    return {p.name: getattr(args, prefix.replace("-", "_") + p.name)
            for p in kernels.params(kind)}


def _common(p: argparse.ArgumentParser, device: bool = True) -> None:
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    if device:
        p.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")


def _trials(p: argparse.ArgumentParser, seconds: float, trials: int) -> None:
    p.add_argument("--seconds", type=_positive(float), default=seconds,
                   help=f"measured seconds, warm-up excluded (default {seconds})")
    p.add_argument("--trials", type=int, default=trials,
                   help=f"trials the measurement is cut into, >= 5 (default {trials})")


def build_parser() -> Parser:
    parser = Parser(prog="python -m gpu_kernels", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="kind", metavar="KIND", required=True,
                                help=", ".join(KINDS))
    for kind in kernels.STRESS_KINDS:
        p = sub.add_parser(kind, help=f"{kind} stress kernel")
        _common(p)
        _trials(p, seconds=5.0, trials=10)
        p.add_argument("--warmup-seconds", type=float, default=1.0)
        p.add_argument("--rest-seconds", type=float, default=0.0,
                       help="idle the GPU this long before each trial: measures bursts, "
                            "below the power limit's clock drop (default 0: sustained)")
        p.add_argument("--bar", type=float, default=None,
                       help="minimum median to pass (default: the datasheet bar of a known GPU, "
                            "gpu_kernels/datasheets.py)")
        p.add_argument("--no-bar", action="store_true", help="judge no bar")
        p.add_argument("--max-cv", type=float, default=result.DEFAULT_MAX_CV,
                       help="CV above which the trials are flagged unstable")
        _add_params(p, kernels.params(kind))

    p = sub.add_parser("memhog", help="hold a fraction of free device memory")
    _common(p)
    p.add_argument("--fraction", type=_fraction, default=0.9)
    p.add_argument("--seconds", type=_positive(float), default=5.0)

    p = sub.add_parser("fault", help="trigger an illegal address on purpose")
    _common(p)

    p = sub.add_parser("inventory", help="NVML node inventory and STACK-NODE verdicts")
    p.add_argument("--json", action="store_true")
    p.add_argument("--expected-driver-version", default=None)
    p.add_argument("--min-driver-version", default=None)
    p.add_argument("--allowed-compute-modes", default="Default",
                   help="comma-separated (default Default)")

    p = sub.add_parser("interference", help="N copies of a kernel sharing one GPU")
    _common(p)
    _trials(p, seconds=3.0, trials=5)
    p.add_argument("--kernel", choices=kernels.STRESS_KINDS)
    p.add_argument("--copies", type=_int_list, default=[1, 2, 4])
    p.add_argument("--mix", type=_kind_list, default=None,
                   help="run one copy of each listed kernel together, e.g. membw,fp32")
    p.add_argument("--max-overhead", type=float, default=0.15,
                   help="largest tolerated 1 - aggregate/solo (default 0.15)")
    p.add_argument("--min-jain", type=float, default=0.90)
    p.add_argument("--max-cv", type=float, default=0.05)
    p.add_argument("--mps", action="store_true", help="under a private MPS daemon")
    _mps_replicas(p)
    for kind in kernels.STRESS_KINDS:
        _add_params(p, kernels.params(kind), prefix=f"{kind}-")

    p = sub.add_parser("latency", help="tail latency of an inference-like client beside "
                                       "time-sliced and MPS sharers")
    _common(p)
    p.add_argument("--seconds", type=_positive(float), default=8.0,
                   help="measured seconds per point (default 8.0)")
    p.add_argument("--sharers", type=_int_list, default=[1, 2, 4, 8],
                   help="time-sliced sharer counts (default 1,2,4,8; solo is always measured)")
    p.add_argument("--mps-sharers", type=_int_list, default=[],
                   help="sharer counts under a private MPS daemon (default none)")
    p.add_argument("--stress", choices=kernels.STRESS_KINDS, default="gemm",
                   help="what the sharers run (default gemm)")
    p.add_argument("--think-ms", type=float, default=1.0,
                   help="client's idle time before each request (default 1.0)")
    _add_params(p, kernels.params("infer"), prefix="infer-")
    for kind in kernels.STRESS_KINDS:
        _add_params(p, kernels.params(kind), prefix=f"{kind}-")

    p = sub.add_parser("burn", help="burn-in: every GPU at its power limit, every iteration "
                                    "verified, NVML health before and after")
    _common(p, device=False)
    p.add_argument("--seconds", type=_positive(float), default=60.0,
                   help="burn time after the references (default 60)")
    p.add_argument("--devices", type=_devices, default=None,
                   help="'all' or comma-separated CUDA indices (default all)")
    p.add_argument("--membw-launches", type=_positive(int), default=1,
                   help="triad launches per iteration (default 1)")
    p.add_argument("--sample-period", type=_positive(float), default=0.5,
                   help="seconds between NVML samples (default 0.5)")
    p.add_argument("--min-power-fraction", type=float, default=0.95,
                   help="median power / enforced limit a GPU must reach (default 0.95; "
                        "0 judges no power)")
    p.add_argument("--inject-corruption", action="store_true",
                   help="flip one bit of each output in one iteration on the first GPU: the "
                        "run must fail with it found")
    from gpu_kernels.burn import BurnConfig

    for kind in ("gemm", "membw"):
        _add_params(p, kernels.params(kind), prefix=f"{kind}-",
                    defaults=getattr(BurnConfig(), kind))

    p = sub.add_parser("isolation", help="memory or fault isolation between two copies")
    _common(p)
    p.add_argument("--mode", choices=("memory", "fault"), required=True)
    p.add_argument("--mps", action="store_true")
    _mps_replicas(p)
    p.add_argument("--fraction", type=_fraction, default=0.88,
                   help="share of free memory the holder takes (memory mode)")
    p.add_argument("--probe-fraction", type=_fraction, default=0.25,
                   help="share of total memory the other copy asks for (memory mode)")
    p.add_argument("--victim", choices=kernels.STRESS_KINDS, default="membw")
    p.add_argument("--seconds", type=_positive(float), default=6.0,
                   help="victim run time (fault mode)")
    for kind in kernels.STRESS_KINDS:
        _add_params(p, kernels.params(kind), prefix=f"{kind}-")
    return parser


def _validate(args: argparse.Namespace) -> None:
    if getattr(args, "trials", 5) < 5:
        raise UsageError("--trials must be >= 5")
    if getattr(args, "rest_seconds", 0.0) < 0:
        raise UsageError("--rest-seconds must be >= 0")
    if args.kind == "interference" and not args.kernel and not args.mix:
        raise UsageError("interference needs --kernel K or --mix K1,K2")
    if getattr(args, "think_ms", 0.0) < 0:
        raise UsageError("--think-ms must be >= 0")
    if not 0 <= getattr(args, "min_power_fraction", 0.0) <= 1:
        raise UsageError("--min-power-fraction must be between 0 and 1")


def _run(args: argparse.Namespace) -> dict[str, Any]:
    kind = args.kind
    if kind in kernels.STRESS_KINDS:
        from gpu_kernels import runner

        return runner.run(kind, _params_of(args, kind), seconds=args.seconds,
                          trials=args.trials, warmup_seconds=args.warmup_seconds,
                          bar=args.bar, no_bar=args.no_bar, max_cv=args.max_cv,
                          device=args.device, rest_seconds=args.rest_seconds)
    if kind == "memhog":
        from gpu_kernels import cuda, memhog

        out = result.header("memhog")
        out.update(memhog.run(cuda.load(args.device), args.fraction, args.seconds))
        out.update({"ok": out["succeeded"],
                    "exit_code": result.EXIT_OK if out["succeeded"] else result.EXIT_FAILED})
        return out
    if kind == "fault":
        from gpu_kernels import cuda, fault

        cp = cuda.load(args.device)
        out = result.header("fault")
        out.update({"device": cuda.identity(cp, args.device), **fault.trigger(cp)})
        out.update({"ok": out["raised"],
                    "exit_code": result.EXIT_OK if out["raised"] else result.EXIT_FAILED})
        return out
    if kind == "inventory":
        from gpu_kernels import node

        return node.run(args.expected_driver_version, args.min_driver_version,
                        tuple(m.strip() for m in args.allowed_compute_modes.split(",")))
    if kind == "interference":
        from gpu_kernels import interference
        from gpu_kernels.analysis import Thresholds

        return interference.run(
            kernel=args.kernel, counts=args.copies, mix=args.mix,
            options={k: _params_of(args, k, f"{k}-") for k in kernels.STRESS_KINDS},
            window=interference.Window(seconds=args.seconds, trials=args.trials),
            limits=Thresholds(args.max_overhead, args.min_jain, args.max_cv),
            device=args.device, use_mps=args.mps, mps_replicas=args.mps_replicas)
    if kind == "latency":
        from gpu_kernels import interference, latency

        return latency.run(
            client_options=_params_of(args, "infer", "infer-"), think_ms=args.think_ms,
            stress_kind=args.stress,
            stress_options=_params_of(args, args.stress, f"{args.stress}-"),
            sharers=args.sharers, mps_sharers=args.mps_sharers,
            window=interference.Window(seconds=args.seconds), device=args.device)
    if kind == "burn":
        from gpu_kernels import burn

        return burn.run(seconds=args.seconds, devices=args.devices, inject=args.inject_corruption,
                        config=burn.BurnConfig(
                            gemm=_params_of(args, "gemm", "gemm-"),
                            membw=_params_of(args, "membw", "membw-"),
                            membw_launches=args.membw_launches,
                            sample_period=args.sample_period,
                            min_power_fraction=args.min_power_fraction))
    from gpu_kernels import isolation

    return isolation.run(mode_name=args.mode, device=args.device, use_mps=args.mps,
                         fraction=args.fraction, probe_fraction=args.probe_fraction,
                         victim_kind=args.victim,
                         victim_options=_params_of(args, args.victim, f"{args.victim}-"),
                         seconds=args.seconds, mps_replicas=args.mps_replicas)


def _mps_replicas(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mps-replicas", type=_positive(int), default=None, metavar="R",
                   help="MPS with the per-client defaults the NVIDIA device plugin sets for "
                        "sharing.mps with R replicas (pinned memory limit memory/R, active "
                        "threads 100/R %%); implies --mps; the compute mode is left as it is")


def _unavailable_errors() -> tuple[type[BaseException], ...]:
    from gpu_kernels.cuda import CupyUnavailable
    from gpu_kernels.mps import MpsUnavailable
    from gpu_kernels.nvml import NvmlUnavailable
    from gpu_kernels.procs import WorkerUnavailable

    return CupyUnavailable, NvmlUnavailable, MpsUnavailable, WorkerUnavailable


def summary_line(res: dict[str, Any]) -> str:
    """A short human-readable account of a result (without --json)."""
    kind = res.get("kind")
    if res.get("error"):
        return f"{kind}: ERROR {res['error']}"
    if "median" in res:
        met = {True: "met", False: "MISSED", None: "no bar"}[res.get("met")]
        bar = res.get("bar") or {}
        check = "ok" if res["correctness"]["ok"] else "FAILED"
        return (f"{kind} {res['metric']}: median {res['median']:.4g} {res['unit']} "
                f"(cv {100 * (res['cv'] or 0):.2f} %, {len(res['trials'])} trials), bar "
                f"{bar.get('value', '-')} {met}, check {check}")
    if kind == "inventory":
        return "\n".join(f"{v['id']} {v['verdict']}: {v['message']}" for v in res["verdicts"])
    if kind == "interference":
        return "\n".join(
            f"{p['kernel']} N={p['copies']} {p['mode']}: aggregate/solo "
            f"{p.get('aggregate_vs_solo') or 0:.3f} Jain {p.get('jain') or 0:.3f} {p['verdict']}"
            for p in res["points"])
    if kind in ("isolation", "latency"):
        return res["finding"]
    if kind == "burn":
        return "\n".join([f"burn {res['seconds']:g} s on {len(res['gpus'])} GPU(s): "
                          f"{res['verdict']}", *(_burn_line(g) for g in res["gpus"])])
    return " ".join(f"{k}={v}" for k, v in res.items() if not isinstance(v, dict | list))


def _burn_line(g: dict[str, Any]) -> str:
    power, errors = g["power"], g["errors"]
    watts = "n/a" if power["median_w"] is None else (
        f"{power['median_w']:.0f} W ({100 * (power['fraction_of_limit'] or 0):.1f} % of "
        f"{power['limit_w'] or 0:.0f} W)")
    return (f"  GPU {g['index']} {g['uuid']}: {g['verdict']}, {g['iterations']} iterations, "
            f"{errors.get('iterations', 0)} miscompared, median power {watts}, XID "
            f"{g['xid'].get('count')}; " + "; ".join(g["reasons"]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _validate(args)
    except UsageError as exc:
        parser.error(str(exc))
    try:
        res = _run(args)
    except _unavailable_errors() as exc:
        res = result.error_result(args.kind, str(exc), result.EXIT_UNAVAILABLE)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        res = result.error_result(args.kind, f"{type(exc).__name__}: {exc}",
                                  result.EXIT_FAILED)
    print(result.dumps(res) if args.json else summary_line(res), flush=True)
    code = int(res.get("exit_code", result.EXIT_FAILED))
    if args.kind == "fault":
        sys.stderr.flush()
        os._exit(code)  # the faulted context would raise again during CuPy's teardown
    return code
