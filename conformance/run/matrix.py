"""Parameterized runs: a matrix file (operator versions x values sets x sharing configs)
expands into combinations; each runs the suites on its own and keeps its results apart.

```yaml
operator_versions: [v26.7.0]            # chart versions (or `null` for --operator-chart)
values:                                  # named Helm value sets
  default: {}
  no-dcgm: {dcgmExporter.enabled: "false"}
sharing:                                 # named sharing configs: Helm values, sim profile
  none: {values: {}, sim_profile: healthy}
  time-slicing-4:
    sim_profile: time-slicing
    values: {devicePlugin.config.name: time-slicing-config, devicePlugin.config.default: any}
```
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from conformance.common import yamlfile
from conformance.common.console import Progress
from conformance.common.errors import UsageError
from conformance.common.vocab import EXIT_USAGE
from conformance.options import Options
from conformance.report.build import build_matrix_report
from conformance.report.load import load_results
from conformance.run.plan import RunPlan, check_writable

_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Combination:
    operator_version: str | None
    values_name: str
    sharing_name: str
    values: dict[str, str] = field(default_factory=dict)
    sim_profile: str = "healthy"

    @property
    def name(self) -> str:
        parts = [self.operator_version or "chart", self.values_name, self.sharing_name]
        return _NAME.sub("-", "_".join(parts))

    def set_values(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.values.items()]


def load(path: str | Path) -> list[Combination]:
    doc = yamlfile.load(path, "matrix file")
    if not isinstance(doc, dict):
        raise UsageError(f"matrix file {path}: expected a mapping with operator_versions, "
                         "values, sharing")
    unknown = set(doc) - {"operator_versions", "values", "sharing"}
    if unknown:
        raise UsageError(f"matrix file {path}: unknown key(s) {sorted(unknown)}")
    versions = doc.get("operator_versions") or [None]
    values = doc.get("values") or {"default": {}}
    sharing = doc.get("sharing") or {"none": {}}
    if not isinstance(values, dict) or not isinstance(sharing, dict):
        raise UsageError(f"matrix file {path}: values and sharing must be named mappings")
    combos = []
    for version, (vname, vset), (sname, sconf) in itertools.product(
            versions, values.items(), sharing.items()):
        sconf = sconf or {}
        merged = {**{str(k): str(v) for k, v in (vset or {}).items()},
                  **{str(k): str(v) for k, v in (sconf.get("values") or {}).items()}}
        combos.append(Combination(version, str(vname), str(sname), merged,
                                  str(sconf.get("sim_profile", "healthy"))))
    return combos


def run_matrix(options: Options, pytest_args: list[str], progress: Progress) -> int:
    """One run per combination, each in results/<combination>/, then one matrix report."""
    combos = load(options.matrix or "")
    root = Path(options.results)
    check_writable(root)
    codes, done = [], []
    for index, combo in enumerate(combos, 1):
        progress(f"matrix combination {combo.name} ({index}/{len(combos)})")
        one = options.replace(
            matrix=None, results=str(root / combo.name), combination=combo.name,
            operator_version=combo.operator_version or options.operator_version,
            set_values=[*options.set_values, *combo.set_values()], install_operator=True)
        if (options.target or "sim") == "sim":
            one = one.replace(sim_profile=combo.sim_profile)
        codes.append(RunPlan(one, pytest_args=list(pytest_args)).execute(progress))
        done.append(root / combo.name)
    loaded = [load_results(d) for d in done if (d / "results.json").is_file()]
    if loaded:
        paths = build_matrix_report(loaded, root / "matrix-report")
        progress(f"matrix report: {paths.get('html')}")
    return max(codes) if codes else EXIT_USAGE
