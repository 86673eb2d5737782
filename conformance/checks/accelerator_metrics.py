"""accelerator_metrics as kubernetes-sigs/ai-conformance checks it, on the text a metrics
endpoint serves (TestAcceleratorPerformanceMetrics, ``test/accelerator_metrics_test.go``).

- A sample counts as per-accelerator when it carries one of the device label keys
  (:data:`DEVICE_LABELS`: DCGM's ``gpu``/``UUID``/``GPU_I_ID``, ``pci_bus_id``, AMD's
  ``card_id``, Intel's ``dev_id``...).
- Utilization and memory (MUST): the exact metric names when given (``-metrics-utilization-metric``
  / ``-metrics-memory-metric`` there; DCGM_FI_DEV_GPU_UTIL / DCGM_FI_DEV_FB_USED for the DCGM
  exporter), otherwise any per-accelerator metric whose lower-cased name contains one of the
  patterns.
- Temperature, power, interconnect bandwidth (SHOULD): found by name pattern and reported,
  never required.

Lines are read as that test reads the Prometheus text format: comments and blank lines skipped,
the name before ``{`` or the first space, label pairs split on commas outside quotes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

# ai-conformance's deviceLabelKeys, in its order
DEVICE_LABELS = ("gpu", "UUID", "uuid", "device_id", "dev_id", "card_id", "GPU_I_ID",
                 "minor_number", "pci_bus_id")
UTILIZATION_PATTERNS = ("util", "utilization")
MEMORY_PATTERNS = ("mem", "memory", "fb", "vram", "hbm")
OPTIONAL_PATTERNS = {
    "temperature": ("temp", "temperature"),
    "power": ("power", "watt", "energy"),
    "interconnect": ("nvlink", "pcie_tx", "pcie_rx", "bandwidth", "xgmi"),
}
DCGM_UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"
DCGM_MEMORY = "DCGM_FI_DEV_FB_USED"


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def device(self) -> str | None:
        """The device this sample is about (its UUID where it has one), or None."""
        for key in ("UUID", "uuid", *DEVICE_LABELS):
            if key in self.labels:
                suffix = f"/{self.labels['GPU_I_ID']}" if "GPU_I_ID" in self.labels and \
                    key != "GPU_I_ID" else ""
                return f"{key}={self.labels[key]}{suffix}"
        return None


def _split_pairs(text: str) -> list[str]:
    pairs, current, in_quote, escaped = [], [], False, False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\" and in_quote:
            current.append(ch)
            escaped = True
        elif ch == '"':
            in_quote = not in_quote
            current.append(ch)
        elif ch == "," and not in_quote:
            pairs.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        pairs.append("".join(current))
    return pairs


def _labels(text: str) -> dict[str, str]:
    labels = {}
    for pair in _split_pairs(text):
        key, eq, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key:
            continue
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        labels[key] = value
    return labels


def parse(text: str) -> list[Sample]:
    """The samples of a Prometheus text exposition (names and labels; values are not needed)."""
    samples = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        brace, space = line.find("{"), line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            close = line.rfind("}")
            if close <= brace:
                continue
            name, labels = line[:brace].strip(), _labels(line[brace + 1:close])
        elif space != -1:
            name, labels = line[:space].strip(), {}
        else:
            continue
        if name:
            samples.append(Sample(name, labels))
    return samples


def per_accelerator(samples: Iterable[Sample], exact: str | None = None,
                    patterns: Iterable[str] = ()) -> list[Sample]:
    """Samples with a device label whose name is ``exact``, or contains one of ``patterns``."""
    patterns = tuple(patterns)
    found = []
    for s in samples:
        if not any(key in s.labels for key in DEVICE_LABELS):
            continue
        if exact:
            if s.name == exact:
                found.append(s)
        elif any(p in s.name.lower() for p in patterns):
            found.append(s)
    return found


def devices_by_metric(samples: Iterable[Sample]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in samples:
        if s.device:
            out.setdefault(s.name, set()).add(s.device)
    return out


@dataclass
class MetricsReport:
    """What the endpoint offers per accelerator: MUST kinds and SHOULD kinds by metric name."""

    samples: int
    utilization: dict[str, set[str]]
    memory: dict[str, set[str]]
    optional: dict[str, dict[str, set[str]]]

    def missing(self) -> list[str]:
        return [kind for kind, found in (("utilization", self.utilization),
                                         ("memory", self.memory)) if not found]

    def as_dict(self) -> dict:
        def counts(found: dict[str, set[str]]) -> dict[str, int]:
            return {name: len(devices) for name, devices in sorted(found.items())}

        return {"samples": self.samples, "utilization": counts(self.utilization),
                "memory": counts(self.memory),
                "optional": {kind: counts(found) for kind, found in self.optional.items()},
                "device_labels": list(DEVICE_LABELS)}

    def optional_summary(self) -> str:
        parts = []
        for kind, found in self.optional.items():
            parts.append(f"{kind}: " + (", ".join(sorted(found)) if found else "none exposed"))
        return "; ".join(parts)


def check(text: str, utilization_metric: str | None = DCGM_UTILIZATION,
          memory_metric: str | None = DCGM_MEMORY) -> MetricsReport:
    """The endpoint's text, checked as TestAcceleratorPerformanceMetrics checks it."""
    samples = parse(text)
    return MetricsReport(
        samples=len(samples),
        utilization=devices_by_metric(per_accelerator(samples, utilization_metric,
                                                      UTILIZATION_PATTERNS)),
        memory=devices_by_metric(per_accelerator(samples, memory_metric, MEMORY_PATTERNS)),
        optional={kind: devices_by_metric(per_accelerator(samples, None, patterns))
                  for kind, patterns in OPTIONAL_PATTERNS.items()},
    )
