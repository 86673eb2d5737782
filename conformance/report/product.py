"""A CNCF Kubernetes AI Conformance ``PRODUCT.yaml`` draft from a run, and the submission checks.

The checklist of each version (1.33 to 1.37, ``data/cncf/AIConformance-1.3x.yaml``, sources in
``data/cncf/README.md``) is copied item by item: ``id``, ``description`` and ``level`` unchanged,
in the checklist's order. For each item this suite supports, ``status`` is proposed from the run
(the report's own rollup, ``cncf.item_status``), ``evidence`` points at the bundle's files and
``notes`` say on what basis, with the report sections to read. Items the suite does not check
keep an empty status and say so: a person fills them in. It is a draft to review, never a claim
made for the vendor.

:func:`submission_errors` repeats what the CNCF repository's validate workflow
(``.github/workflows/validate.yaml`` -> ``go run -tags validate scripts/validate.go PRODUCT.yaml``)
checks, with the same messages, except what needs the internet: URL reachability and the
vendor's CNCF membership (the landscape), which it lists as not checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from conformance.common.redact import redact_object
from conformance.report import cncf
from conformance.report.errors import ReportInputError
from conformance.report.html_report import slug
from conformance.report.load import check_results

VERSIONS = ("1.33", "1.34", "1.35", "1.36", "1.37")
FILENAME = "PRODUCT.yaml"
# The bundle files every proposed item points at (paths relative to PRODUCT.yaml).
REPORT = "report/report.html"
EVIDENCE_FILES = (REPORT, "junit.xml", "e2e.log")
NOT_CHECKED_NOTE = ("Not checked by gpu-conformance: set the status and evidence for this item "
                    "yourself.")

# --- scripts/validate.go, as of the repository's validate workflow --------------------------
VALID_STATUSES = (cncf.IMPLEMENTED, cncf.NOT_IMPLEMENTED, cncf.PARTIAL, cncf.NOT_APPLICABLE)
METADATA_FIELDS = {  # field -> required
    "kubernetesVersion": True, "platformName": True, "platformVersion": True,
    "vendorName": True, "websiteUrl": True, "repoUrl": False, "documentationUrl": True,
    "productLogoUrl": True, "description": True, "contactEmailAddress": True,
    "k8sConformanceUrl": True,
}
K8S_CONFORMANCE_URL = re.compile(
    r"^https://github\.com/cncf/k8s-conformance/tree/(master|main)/v\d+\.\d+/[^/]+/?$")
_VERSION_IN_PATH = re.compile(r"(?:^|/)(v\d+\.\d+)/")
OFFLINE_UNCHECKED = ("URL reachability (metadata URLs, k8sConformanceUrl, evidence URLs)",
                     "vendorName is a CNCF member (the CNCF landscape)")


def checklist_text(version: str) -> str:
    """The checklist YAML of ``version`` as shipped (1.33 to 1.37)."""
    if version not in VERSIONS:
        raise ReportInputError(f"unknown CNCF AI Conformance checklist version {version!r}: "
                               f"choose one of {', '.join(VERSIONS)}")
    data = resources.files("conformance.report").joinpath("data", "cncf",
                                                          f"AIConformance-{version}.yaml")
    return data.read_text(encoding="utf-8")


def checklist(version: str) -> dict[str, Any]:
    return yaml.safe_load(checklist_text(version))


def _evidence(base_url: str | None, req_ids: list[str]) -> list[str]:
    if not base_url:
        return list(EVIDENCE_FILES)
    base = base_url.rstrip("/")
    return ([f"{base}/{REPORT}#cncf"] + [f"{base}/{REPORT}#req-{slug(r)}" for r in req_ids]
            + [f"{base}/{name}" for name in EVIDENCE_FILES[1:]])


def _notes(item: Mapping[str, Any], run: Mapping[str, Any]) -> str:
    reqs = ", ".join(f"{r['id']} ({r['verdict']})" for r in item["requirements"])
    anchors = ", ".join(f"#req-{slug(r['id'])}" for r in item["requirements"])
    return (f"Proposed by gpu-conformance from run {run.get('id')} (target "
            f"{run.get('target')}): {item['status']} because {item['basis']}. Supporting "
            f"requirements: {reqs}. Report sections: {REPORT}#cncf and {anchors}. "
            "Review before submitting.")


def draft(results: Mapping[str, Any], version: str, *,
          metadata: Mapping[str, Any] | None = None,
          evidence_url: str | None = None) -> dict[str, Any]:
    """The PRODUCT.yaml document for ``version`` with statuses proposed from ``results``.

    ``metadata`` overrides the checklist's placeholder metadata (vendorName, platformName, ...).
    ``evidence_url``: where the bundle will be published; evidence then links the report
    sections themselves (``report.html#cncf``, ``#req-...``). Without it, evidence names the
    bundle's files relative to PRODUCT.yaml (the validator stats local paths, so no anchors).
    """
    check_results(results, "the results")
    clean = redact_object(dict(results))
    proposed = {item["id"]: item for item in cncf.rollup(clean["requirements"])["items"]}
    template = checklist(version)
    meta = dict(template.get("metadata") or {})
    meta["kubernetesVersion"] = f"v{version}"
    meta.setdefault("k8sConformanceUrl", "[k8s-conformance URL]")
    meta.update({str(k): v for k, v in (metadata or {}).items()})
    spec: dict[str, list[dict[str, Any]]] = {}
    for category, items in (template.get("spec") or {}).items():
        spec[category] = []
        for item in items:
            entry = {"id": item["id"], "description": item["description"],
                     "level": item["level"]}
            found = proposed.get(item["id"])
            if found is None:
                entry.update(status="", evidence=[], notes=NOT_CHECKED_NOTE)
            else:
                entry.update(status=found["status"],
                             evidence=_evidence(evidence_url,
                                                [r["id"] for r in found["requirements"]]),
                             notes=_notes(found, clean.get("run") or {}))
            spec[category].append(entry)
    return {"metadata": meta, "spec": spec}


def render(doc: Mapping[str, Any], version: str, run_id: str | None) -> str:
    header = (f"# Kubernetes AI Conformance Checklist - v{version}: DRAFT by gpu-conformance\n"
              f"# from run {run_id}. Statuses are proposed from the run's verdicts; items with\n"
              "# an empty status were not checked by this suite. Review every item, fill in the\n"
              "# metadata, then submit as vX.Y/<product>/PRODUCT.yaml (cncf/k8s-ai-conformance).\n")
    body = yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True, width=10_000,
                          default_flow_style=False)
    return header + "\n" + body


def write(results: Mapping[str, Any], version: str, out_dir: Path, *,
          metadata: Mapping[str, Any] | None = None,
          evidence_url: str | None = None) -> Path:
    from conformance.common.redact import redact_shapes

    doc = draft(results, version, metadata=metadata, evidence_url=evidence_url)
    path = Path(out_dir) / FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    run_id = (results.get("run") or {}).get("id")
    path.write_text(redact_shapes(render(doc, version, run_id)), encoding="utf-8")
    return path


def load_metadata(path: str | Path) -> dict[str, Any]:
    """A YAML mapping of metadata fields (vendorName, platformName, ...) for the draft."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportInputError(f"cannot read product metadata {file}: "
                               f"{exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ReportInputError(f"product metadata {file} is not YAML: "
                               f"{str(exc).splitlines()[0]}") from None
    if isinstance(data, dict) and isinstance(data.get("metadata"), dict):
        data = data["metadata"]
    if not isinstance(data, dict):
        raise ReportInputError(f"product metadata {file} must be a mapping of fields "
                               "(vendorName: ..., platformName: ...)")
    return data


# --- the submission checks ---------------------------------------------------------------------
def _snake(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def submission_errors(path: str | Path, version: str | None = None) -> list[str]:
    """What ``scripts/validate.go`` would report for the PRODUCT.yaml at ``path`` (offline part).

    The version comes from the path (``.../v1.37/<product>/PRODUCT.yaml``) as there, unless
    ``version`` is given (a draft not yet in place); local evidence paths are checked relative
    to the file; URLs are not fetched (see :data:`OFFLINE_UNCHECKED`). An empty list means the
    file would pass those checks.
    """
    path = Path(path)
    if version is None:
        match = _VERSION_IN_PATH.search(path.as_posix())
        if not match:
            return [f"Error: Could not determine version from path {path}"]
        version = match.group(1)[1:]
    if version not in VERSIONS:
        return [f"Error: Schema not found at docs/AIConformance-{version}.yaml"]
    schema = checklist(version)
    product = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    errors: list[str] = []
    meta = product.get("metadata")
    if not isinstance(meta, dict):
        errors.append("Missing 'metadata' section")
    else:
        for name, required in METADATA_FIELDS.items():
            snake = _snake(name)
            value = meta.get(name, meta.get(snake))
            if value is None:
                if required:
                    errors.append(f"Missing metadata field: {name} (or {snake})")
                continue
            if not isinstance(value, str):
                errors.append(f"Metadata field {name} is not a string")
                continue
            if value == "":
                if required:
                    errors.append(f"Metadata field {name} is empty")
            elif value.startswith("[") and value.endswith("]"):
                errors.append(f"Metadata field {name} has placeholder value: {value}")
            elif name == "k8sConformanceUrl":
                if not K8S_CONFORMANCE_URL.match(value):
                    errors.append(f"Invalid k8sConformanceUrl format: {value}. Expected format: "
                                  "https://github.com/cncf/k8s-conformance/tree/master/"
                                  "v{version}/{product}")
            elif value.startswith("http") and name == "productLogoUrl" and \
                    not value.lower().endswith((".svg", ".eps", ".ai")):
                errors.append(f"productLogoUrl must link to an SVG, EPS, or AI file: {value}")
    spec = product.get("spec")
    if not isinstance(spec, dict):
        errors.append("Missing 'spec' section")
        return errors
    for category, schema_reqs in (schema.get("spec") or {}).items():
        if category not in spec:
            errors.append(f"Missing spec category: {category}")
            continue
        by_id = {r.get("id"): r for r in spec[category] or () if isinstance(r, dict)}
        for s_req in schema_reqs:
            p_req = by_id.get(s_req["id"])
            if p_req is None:
                errors.append(f"Missing requirement '{s_req['id']}' in category '{category}'")
                continue
            status = p_req.get("status") or ""
            evidence = [e for e in p_req.get("evidence") or () if e]
            if s_req["level"] == "SHOULD" and status == "" and not p_req.get("evidence"):
                continue
            if status not in VALID_STATUSES:
                errors.append(f"Invalid status '{status}' for '{s_req['id']}'. Must be one of "
                              "[" + " ".join(VALID_STATUSES) + "]")
            if s_req["level"] == "MUST" and status != cncf.IMPLEMENTED:
                errors.append(f"Requirement '{s_req['id']}' is MUST level but status is "
                              f"'{status}'. It must be 'Implemented'.")
            if status == cncf.NOT_APPLICABLE and not p_req.get("notes"):
                errors.append(f"Notes required for '{s_req['id']}' when status is N/A")
            for link in evidence:
                if not str(link).startswith(("http://", "https://")) and \
                        not (path.parent / str(link)).exists():
                    errors.append(f"Invalid evidence file for '{s_req['id']}': {link} (not "
                                  f"found at {path.parent / str(link)})")
    return errors
