"""Certify a candidate run (new driver, operator, Kubernetes) against a baseline run.

The candidate is CERTIFIED when nothing regressed: no requirement went to fail, nothing the
baseline verified went unverified, and no kernel or interference figure moved in the wrong
direction by more than the tolerance. Fixes, improvements and other changes are listed but do
not block; fingerprint differences are shown as "what changed" so the reader sees which
upgrade the verdict is about.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from conformance.common.redact import redact_text as redact
from conformance.report import fmt, measure, model
from conformance.report.errors import ReportInputError
from conformance.report.load import check_results
from conformance.report.markdown_report import cell, table

CERTIFIED, NOT_CERTIFIED = "CERTIFIED", "NOT CERTIFIED"
REGRESSION, FIX, CHANGE = "regression", "fix", "change"
IMPROVEMENT, ADDED, REMOVED = "improvement", "added", "removed"
_UNVERIFIED = ("skip", "not-run")
ARROW = "\u2192"


@dataclass(frozen=True)
class RequirementChange:
    id: str
    title: str
    baseline: str | None  # verdict, or None when the requirement is absent from that run
    candidate: str | None
    kind: str  # regression | fix | change
    note: str
    message: str = ""
    diagnosis: str | None = None


@dataclass(frozen=True)
class FigureChange:
    name: str
    unit: str
    baseline: float | None
    candidate: float | None
    relative: float | None  # (candidate - baseline) / |baseline|
    higher_is_better: bool
    kind: str  # regression | improvement | added | removed


@dataclass(frozen=True)
class FingerprintChange:
    field: str
    baseline: str
    candidate: str


@dataclass
class CertificationResult:
    verdict: str
    tolerance: float
    baseline_run: dict[str, Any]
    candidate_run: dict[str, Any]
    requirement_changes: list[RequirementChange] = field(default_factory=list)
    figure_changes: list[FigureChange] = field(default_factory=list)
    fingerprint_changes: list[FingerprintChange] = field(default_factory=list)

    @property
    def certified(self) -> bool:
        return self.verdict == CERTIFIED

    @property
    def changed_requirements(self) -> list[str]:
        """IDs of every requirement whose verdict differs between the runs."""
        return [c.id for c in self.requirement_changes]

    @property
    def regressed_requirements(self) -> list[str]:
        return [c.id for c in self.requirement_changes if c.kind == REGRESSION]

    @property
    def regressed_figures(self) -> list[str]:
        return [c.name for c in self.figure_changes if c.kind == REGRESSION]

    @property
    def regressions(self) -> list[str]:
        """One line per regression, requirements first."""
        lines = [f"{c.id}: {_verdict(c.baseline)} {ARROW} {_verdict(c.candidate)} ({c.note})"
                 for c in self.requirement_changes if c.kind == REGRESSION]
        lines += [f"{c.name}: {_figure_delta(c)}" for c in self.figure_changes
                  if c.kind == REGRESSION]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "gpuconf-certification",
            "version": 1,
            "verdict": self.verdict,
            "certified": self.certified,
            "tolerance": self.tolerance,
            "baseline": self.baseline_run,
            "candidate": self.candidate_run,
            "regressions": {"requirements": self.regressed_requirements,
                            "figures": self.regressed_figures},
            "requirement_changes": [asdict(c) for c in self.requirement_changes],
            "figure_changes": [asdict(c) for c in self.figure_changes],
            "fingerprint_changes": [asdict(c) for c in self.fingerprint_changes],
        }

    def to_markdown(self) -> str:
        b, c = self.baseline_run, self.candidate_run
        lines = [
            f"# Certification: {self.verdict}", "",
            f"Candidate run `{cell(c.get('id') or '—')}` ({cell(fmt.text(c.get('started')))}) "
            f"against baseline run `{cell(b.get('id') or '—')}` "
            f"({cell(fmt.text(b.get('started')))}); figure tolerance "
            f"{fmt.percent(self.tolerance)}.", "",
        ]
        regressions = self.regressions
        lines += ([f"**{len(regressions)} regression{'s' if len(regressions) != 1 else ''}:**",
                   ""] + [f"- {cell(r)}" for r in regressions] + [""]
                  if regressions else ["No regressions.", ""])
        lines += ["## What changed", ""]
        lines += (table(["Property", "Baseline", "Candidate"],
                        [(f.field, f.baseline, f.candidate) for f in self.fingerprint_changes])
                  if self.fingerprint_changes
                  else ["The cluster fingerprints are identical.", ""])
        lines += ["## Requirement verdicts", ""]
        if self.requirement_changes:
            lines += table(
                ["Requirement", "Title", "Baseline", "Candidate", "Change", "Candidate message"],
                [(ch.id, ch.title, _verdict(ch.baseline), _verdict(ch.candidate),
                  f"{ch.kind}: {ch.note}", ch.message) for ch in self.requirement_changes])
        else:
            lines += ["Every requirement has the same verdict in both runs.", ""]
        lines += ["## Figures", ""]
        if self.figure_changes:
            lines += table(["Figure", "Baseline", "Candidate", "Change", "Kind"], [
                (f.name, fmt.number(f.baseline, f.unit), fmt.number(f.candidate, f.unit),
                 fmt.percent(f.relative, signed=True), f.kind) for f in self.figure_changes])
        else:
            lines += [f"No figure moved by more than {fmt.percent(self.tolerance)}.", ""]
        return "\n".join(lines)


def _verdict(verdict: str | None) -> str:
    return "absent" if verdict is None else verdict


def _figure_delta(change: FigureChange) -> str:
    return (f"{fmt.number(change.baseline, change.unit)} {ARROW} "
            f"{fmt.number(change.candidate, change.unit)} "
            f"({fmt.percent(change.relative, signed=True)})")


# --- requirement verdicts -----------------------------------------------------------------

def classify(baseline: str | None, candidate: str | None) -> tuple[str, str]:
    """(kind, note) of one verdict transition; only called when the verdicts differ."""
    if candidate == "fail":
        return REGRESSION, "new requirement fails" if baseline is None else "now fails"
    if baseline == "pass" and candidate in _UNVERIFIED:
        return REGRESSION, "no longer verified"
    if baseline == "pass" and candidate is None:
        return REGRESSION, "removed; it passed in the baseline"
    if baseline == "fail" and candidate == "pass":
        return FIX, "now passes"
    if baseline is None:
        return CHANGE, "new requirement"
    if candidate is None:
        return CHANGE, "removed"
    if candidate == "pass":
        return CHANGE, "newly verified"
    return CHANGE, f"{baseline} {ARROW} {candidate}"


def requirement_changes(baseline: Mapping[str, Any],
                        candidate: Mapping[str, Any]) -> list[RequirementChange]:
    base = {str(r["id"]): r for r in baseline["requirements"]}
    cand = {str(r["id"]): r for r in candidate["requirements"]}
    order = list(base) + [i for i in cand if i not in base]
    changes = []
    for req_id in order:
        b, c = base.get(req_id), cand.get(req_id)
        bv = model.verdict_of(b) if b else None
        cv = model.verdict_of(c) if c else None
        if bv == cv:
            continue
        kind, note = classify(bv, cv)
        source = c or b or {}
        changes.append(RequirementChange(
            id=req_id, title=str(source.get("title") or ""), baseline=bv, candidate=cv,
            kind=kind, note=note, message=redact(str((c or {}).get("message") or "")),
            diagnosis=redact(str(c["diagnosis"])) if c and c.get("diagnosis") else None,
        ))
    return changes


# --- figures ---------------------------------------------------------------------------------

def figures(results: Mapping[str, Any]) -> dict[str, tuple[float, str, bool]]:
    """Comparable figures of one run: name -> (value, unit, higher_is_better)."""
    found: dict[str, tuple[float, str, bool]] = {}

    def add(name: str, value: float | None, unit: str, higher: bool) -> None:
        if value is None:
            return
        key, copy = name, 2
        while key in found:
            key, copy = f"{name} #{copy}", copy + 1
        found[key] = (value, unit, higher)

    measurements = results.get("measurements") or {}
    for kernel in measure.kernels(measurements):
        add(kernel.key, kernel.median, kernel.unit, kernel.higher_is_better)
    for series in measure.interference(measurements):
        for p in series.points:
            add(series.key(p.copies, "aggregate vs solo"), p.aggregate_vs_solo, "", True)
            add(series.key(p.copies, "Jain index"), p.jain, "", True)
            mean_slowdown = sum(p.slowdown) / len(p.slowdown) if p.slowdown else None
            add(series.key(p.copies, "mean slowdown"), mean_slowdown, "x", False)
            add(series.key(p.copies, "p50 latency"), p.latency_p50_ms, "ms", False)
            add(series.key(p.copies, "p99 latency"), p.latency_p99_ms, "ms", False)
    return found


def figure_changes(baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                   tolerance: float) -> list[FigureChange]:
    base, cand = figures(baseline), figures(candidate)
    changes = []
    for name in list(base) + [n for n in cand if n not in base]:
        if name not in cand:
            value, unit, higher = base[name]
            changes.append(FigureChange(name, unit, value, None, None, higher, REMOVED))
            continue
        if name not in base:
            value, unit, higher = cand[name]
            changes.append(FigureChange(name, unit, None, value, None, higher, ADDED))
            continue
        (b, unit, higher), (c, _, _) = base[name], cand[name]
        if b == 0:
            continue  # no meaningful relative change from zero
        relative = (c - b) / abs(b)
        if abs(relative) <= tolerance:
            continue
        worse = relative < 0 if higher else relative > 0
        changes.append(FigureChange(name, unit, b, c, relative, higher,
                                    REGRESSION if worse else IMPROVEMENT))
    return changes


# --- fingerprint -----------------------------------------------------------------------------

def _context(results: Mapping[str, Any]) -> dict[str, str]:
    fp = model.fingerprint(results)
    run = results.get("run") or {}
    totals = fp["gpu_totals"]
    return {
        "Kubernetes version": fmt.text(fp["kubernetes_version"]),
        "GPU Operator version": fmt.text(fp["operator_version"]),
        "Operator chart version": fmt.text(fp["chart_version"]),
        "Driver version(s)": fmt.listing(fp["driver_versions"]),
        "CUDA version(s)": fmt.listing(fp["cuda_versions"]),
        "Sharing strategies": fmt.listing(fp["sharing_strategies"]),
        "GPUs": ", ".join(f"{n} x {p}" for p, n in sorted(totals.items())) or "none",
        "GPU nodes": str(len(fp["nodes"])),
        "Target": fmt.text(run.get("target")),
        "Profile": fmt.text(run.get("profile")),
        "Combination": fmt.text(run.get("combination")),
        "Injected faults": fmt.listing(model.as_list(run.get("faults")), "none"),
    }


def fingerprint_changes(baseline: Mapping[str, Any],
                        candidate: Mapping[str, Any]) -> list[FingerprintChange]:
    b, c = _context(baseline), _context(candidate)
    return [FingerprintChange(k, redact(b[k]), redact(c[k])) for k in b if b[k] != c[k]]


def _run_summary(results: Mapping[str, Any]) -> dict[str, Any]:
    run = results.get("run") or {}
    counts = model.verdict_counts(results["requirements"])
    return {"id": run.get("id"), "started": run.get("started"), "target": run.get("target"),
            "combination": run.get("combination"), "counts": counts}


def compare(baseline: Mapping[str, Any], candidate: Mapping[str, Any],
            tolerance: float = 0.05) -> CertificationResult:
    """Compare two runs' results; the candidate is certified when nothing regressed.

    ``tolerance`` is relative (0.05 = 5 %): a figure that moved less than that either way is
    noise. Raises ReportInputError for results that are not gpuconf results v1.
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) \
            or not math.isfinite(tolerance) or tolerance < 0:
        raise ReportInputError(f"tolerance must be a fraction >= 0 (0.05 = 5 %), got {tolerance!r}")
    check_results(baseline, "the baseline")
    check_results(candidate, "the candidate")
    req = requirement_changes(baseline, candidate)
    figs = figure_changes(baseline, candidate, float(tolerance))
    regressed = any(c.kind == REGRESSION for c in req) or any(f.kind == REGRESSION for f in figs)
    return CertificationResult(
        verdict=NOT_CERTIFIED if regressed else CERTIFIED, tolerance=float(tolerance),
        baseline_run=_run_summary(baseline), candidate_run=_run_summary(candidate),
        requirement_changes=req, figure_changes=figs,
        fingerprint_changes=fingerprint_changes(baseline, candidate),
    )
