"""A solo kernel run: build, warm up, time trials with NVML sampling, check, judge the bar."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpu_kernels import cuda, kernels, nvml, result, timing


def run(kind: str, options: Mapping[str, Any], *, seconds: float, trials: int,
        warmup_seconds: float, bar: float | None = None, no_bar: bool = False,
        max_cv: float = result.DEFAULT_MAX_CV, device: int = 0,
        rest_seconds: float = 0.0) -> dict[str, Any]:
    cp = cuda.load(device)
    ident = cuda.identity(cp, device)
    w = kernels.build(kind, cp, dict(options))
    warm = timing.warm_up(cp, w, warmup_seconds)
    with nvml.Sampler(ident["pci_bus_id"], ident["uuid"], device) as sampler:
        done = timing.run_trials(cp, w, trials, seconds / trials, warm["launch_ms"],
                                 rest_seconds)
    correctness = w.check()
    return result.kernel_result(
        kind=kind, metric=w.metric, unit=w.unit,
        trial_rates=[w.rate(t.launches, t.gpu_seconds) for t in done],
        trial_seconds=[t.gpu_seconds for t in done],
        trial_launches=[t.launches for t in done],
        latencies_ms=[lat for t in done for lat in t.latencies_ms],
        work_per_launch=w.work_per_launch, work_unit=w.work_unit,
        correctness=correctness, device=ident,
        config={**w.config, "regime": "burst" if rest_seconds > 0 else "sustained",
                "rest_seconds": rest_seconds}, warmup=warm,
        samples=[sampler.summary(t.host_start, t.host_end) for t in done],
        bar=result.resolve_bar(w.judged_as, w.unit, ident["name"], bar, no_bar), max_cv=max_cv,
        peak=result.resolve_peak(w.judged_as, w.unit, ident["name"]),
    )
