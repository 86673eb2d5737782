"""Where `make test`'s time goes: the summed duration of the tests of each test directory, read
from the run's JUnit XML (``pytest --junitxml``), beside the run's wall time.

Under xdist the directories run at once on several workers, so their sums add up to more than
the wall time; their ratio is how much the workers bought.

    python ci/test_times.py .test-times.xml [--wall-seconds S]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def directory_of(classname: str) -> str:
    """``tests.integration.test_run`` -> ``tests/integration``."""
    parts = classname.split(".")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def sums(junit: Path) -> dict[str, tuple[int, float]]:
    """Test directory -> (tests, summed seconds)."""
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for case in ET.parse(junit).getroot().iter("testcase"):
        row = out[directory_of(case.get("classname", ""))]
        row[0] += 1
        row[1] += float(case.get("time") or 0)
    return {k: (int(v[0]), v[1]) for k, v in sorted(out.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--wall-seconds", type=float)
    args = parser.parse_args(argv)
    if not args.junit.is_file():
        print(f"test_times: no JUnit XML at {args.junit}", file=sys.stderr)
        return 2
    rows = sums(args.junit)
    total = sum(s for _n, s in rows.values())
    print("test time per directory (summed over workers):")
    for directory, (count, seconds) in rows.items():
        print(f"  {directory:<20} {count:>4} tests  {seconds / 60:6.1f} min")
    print(f"  {'all':<20} {sum(n for n, _s in rows.values()):>4} tests  {total / 60:6.1f} min")
    if args.wall_seconds:
        print(f"wall time {args.wall_seconds / 60:.1f} min: {total / args.wall_seconds:.1f}x "
              "the summed test time of one worker")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
