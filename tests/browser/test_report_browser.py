"""Render report.html in headless Debian chromium: the summary and every requirement row are
in the rendered DOM and visible (rows are never collapsed; only evidence is), and a
screenshot is kept under tests/artifacts/ for a person to look at."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conformance.catalog import REQUIREMENTS
from conformance.report import build_matrix_report, build_report

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("GPUCONF_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
FAILING = "STACK-DP-002"

if not Path(CHROMIUM).is_file():
    pytest.skip(f"{CHROMIUM} is absent: install Debian chromium (apt-get install -y chromium) "
                "to render the report", allow_module_level=True)


def _fixtures():
    """tests/unit/test_report_fixtures.py, loaded by path (it lives in another test folder)."""
    path = ROOT / "tests" / "unit" / "test_report_fixtures.py"
    spec = importlib.util.spec_from_file_location("report_fixtures", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fixtures = _fixtures()


def chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}", "--window-size=1400,3000", *args, url,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


# Appended to a copy of the report (the report itself has no scripts, and its CSP forbids
# them): writes, for the summary and each requirement row, whether it is rendered visibly.
PROBE = """
<script>
(function () {
  function seen(el) {
    if (!el) return false;
    var box = el.getBoundingClientRect();
    return el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})
      && box.width > 0 && box.height > 0;
  }
  var rows = {};
  document.querySelectorAll('tr[data-requirement]').forEach(function (tr) {
    rows[tr.dataset.requirement] = seen(tr) && seen(tr.querySelector('td.id'));
  });
  var evidence = Array.prototype.map.call(
    document.querySelectorAll('details.evidence pre'), seen);
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({
    summary: seen(document.getElementById('summary')),
    verdict: seen(document.querySelector('#summary .verdict .value')),
    rows: rows, evidence: evidence
  });
  document.body.appendChild(out);
})();
</script>
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    results = fixtures.make_results(
        verdicts={FAILING: "fail"},
        messages={FAILING: f"2 of 3 GPU nodes advertise no nvidia.com/gpu {fixtures.SCRIPT}"},
    )
    return build_report(results, out)["html"]


def probe(tmp_path: Path, html: Path) -> dict:
    text = html.read_text(encoding="utf-8")
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = chromium(tmp_path, probed.as_uri(), "--dump-dom").stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_rendered_dom_has_summary_and_every_row(tmp_path: Path, report: Path) -> None:
    dom = chromium(tmp_path, report.as_uri(), "--dump-dom").stdout
    assert 'id="summary"' in dom and "Overall verdict" in dom and ">FAIL<" in dom
    rows = re.findall(r'<tr id="req-[^"]+" class="req [^"]+" data-requirement="([^"]+)"', dom)
    assert rows == [r.id for r in REQUIREMENTS]
    assert "<script>alert" not in dom  # the planted markup stayed text


def test_summary_and_rows_are_visible_and_evidence_collapsed(tmp_path: Path,
                                                             report: Path) -> None:
    seen = probe(tmp_path, report)
    assert seen["summary"] and seen["verdict"]
    hidden = [rid for rid, visible in seen["rows"].items() if not visible]
    assert set(seen["rows"]) == {r.id for r in REQUIREMENTS}
    assert hidden == [], f"requirement rows not visible: {hidden}"
    assert seen["evidence"] and not any(seen["evidence"]), "evidence must start collapsed"


def test_screenshot_is_kept_as_an_artifact(tmp_path: Path, report: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-screenshot.png"
    shot.unlink(missing_ok=True)
    chromium(tmp_path, report.as_uri(), f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    shutil.copy(report, ARTIFACTS / "report.html")


def test_matrix_report_renders_every_combination(tmp_path: Path) -> None:
    runs = [fixtures.make_results(combination="timeslicing"),
            fixtures.make_results(combination="mps", verdicts={FAILING: "fail"})]
    html = build_matrix_report(runs, tmp_path / "matrix")["html"]
    seen = probe(tmp_path, html)
    assert seen["summary"]
    dom = chromium(tmp_path, html.as_uri(), "--dump-dom").stdout
    assert dom.count('data-requirement="STACK-OP-001"') == 2
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    chromium(tmp_path, html.as_uri(), f"--screenshot={ARTIFACTS / 'matrix-screenshot.png'}")
