"""Turns test reports into one verdict per requirement and writes ``results.json``.

See docs/results-format.md. A requirement's verdict is the worst of its tests' outcomes
(fail > pass > skip > not-applicable > not-run); every catalog requirement is listed, those that
no collected test covered as ``not-run``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from conformance import __version__, catalog
from conformance.common.redact import redact_object, redact_text
from conformance.common.vocab import OUTCOME_VERDICT, VERDICTS, worst

FORMAT = "gpuconf-results"
VERSION = 1
MAX_EVIDENCE_CHARS = 200_000


def utcnow() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class TestOutcome:
    nodeid: str
    requirement: str
    outcome: str  # passed | failed | skipped | not-applicable
    duration_s: float
    message: str = ""
    evidence: list[dict] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return OUTCOME_VERDICT[self.outcome]


@dataclass
class RunResults:
    run_id: str
    target: str
    started: str = field(default_factory=utcnow)
    profile: str | None = None
    faults: list[str] = field(default_factory=list)
    combination: str | None = None
    pytest_args: list[str] = field(default_factory=list)
    outcomes: list[TestOutcome] = field(default_factory=list)
    fingerprint: dict = field(default_factory=dict)
    measurements: dict = field(default_factory=dict)
    interrupted: bool = False

    def add(self, outcome: TestOutcome) -> None:
        self.outcomes.append(outcome)

    def add_measurement(self, family: str, value) -> None:
        if family == "scheduling_latency":
            self.measurements[family] = value
        else:
            self.measurements.setdefault(family, []).append(value)

    def requirement_rows(self) -> list[dict]:
        rows = []
        for req in catalog.REQUIREMENTS:
            tests = [o for o in self.outcomes if o.requirement == req.id]
            verdict = worst([t.verdict for t in tests])
            failing = [t for t in tests if t.verdict == "fail"]
            deciding = failing or [t for t in tests if t.verdict == verdict]
            message = "; ".join(dict.fromkeys(t.message for t in deciding if t.message))
            row = req.as_dict()
            row.update(
                verdict=verdict,
                diagnosis=(f"Likely broken: {req.suspect}" if verdict == "fail" else None),
                message=redact_text(message)[:4000],
                tests=[{"nodeid": t.nodeid, "outcome": t.outcome,
                        "duration_s": round(t.duration_s, 3),
                        "message": redact_text(t.message)[:4000]} for t in tests],
                evidence=[ev for t in tests for ev in t.evidence],
            )
            rows.append(row)
        return rows

    def to_dict(self, exit_status: int | None = None) -> dict:
        rows = self.requirement_rows()
        summary = {v: 0 for v in VERDICTS}
        for row in rows:
            summary[row["verdict"]] += 1
        summary["total"] = len(rows)
        return {
            "format": FORMAT,
            "version": VERSION,
            "run": {
                "id": self.run_id, "started": self.started, "finished": utcnow(),
                "target": self.target, "profile": self.profile, "faults": self.faults,
                "combination": self.combination, "gpuconf_version": __version__,
                "interrupted": self.interrupted, "exit_status": exit_status,
                "pytest_args": [redact_text(a) for a in self.pytest_args],
            },
            "fingerprint": redact_object(self.fingerprint),
            "requirements": rows,
            "measurements": redact_object(self.measurements),
            "summary": summary,
        }

    def write(self, folder: Path, exit_status: int | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        doc = self.to_dict(exit_status)
        path = folder / "results.json"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(doc, indent=2, default=str))
        tmp.replace(path)
        evidence_dir = folder / "evidence"
        for family, values in self.measurements.items():
            evidence_dir.mkdir(exist_ok=True)
            (evidence_dir / f"{family}.json").write_text(
                json.dumps(redact_object(values), indent=2, default=str))
        return path


def clip(text: str | None) -> str:
    text = text or ""
    if len(text) <= MAX_EVIDENCE_CHARS:
        return text
    return text[:MAX_EVIDENCE_CHARS] + f"\n... ({len(text) - MAX_EVIDENCE_CHARS} chars cut)"
