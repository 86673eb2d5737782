"""PRODUCT.yaml drafts: the checklist of each version (1.33-1.37) copied with id, description
and level unchanged, statuses proposed from the run, and the checks of the CNCF repository's
validate workflow (scripts/validate.go) reproduced: a completed draft passes them, and each kind
of mistake they catch is caught, with validate.go's message."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from bundle_fixtures import results_folder
from test_report_fixtures import make_results

from conformance.catalog import REQUIREMENTS
from conformance.report import bundle, cncf, product

# dra.md section 4.1 (M = MUST, S = SHOULD), by category in checklist order
ITEMS = {
    "1.33": {"accelerators": {"dra_support": "S"}},
    "1.34": {"accelerators": {"dra_support": "M"}},
    "1.35": {"accelerators": {"dra_support": "M", "driver_runtime_management": "S",
                              "gpu_sharing": "S", "virtualized_accelerator": "S"}},
    "1.36": {"accelerators": {"driver_runtime_management": "S", "gpu_sharing": "S",
                              "virtualized_accelerator": "S"},
             "networking": {"ai_inference": "M", "advanced_inference_ingress": "S",
                            "high_performance_networking": "S",
                            "disaggregated_inference": "S"}},
    "1.37": {"accelerators": {"driver_runtime_management": "S", "gpu_sharing": "S",
                              "virtualized_accelerator": "S"},
             "networking": {"ai_inference": "M", "advanced_inference_ingress": "S",
                            "high_performance_networking": "S",
                            "disaggregated_inference": "S"},
             "security": {"secure_accelerator_access": "M", "workload_sandboxing": "S"}},
}
COMMON = {"networking": {"ai_inference": "M"},
          "schedulingOrchestration": {"gang_scheduling": "M", "cluster_autoscaling": "M",
                                      "pod_autoscaling": "M"},
          "observability": {"accelerator_metrics": "M", "ai_service_metrics": "M"},
          "security": {"secure_accelerator_access": "M"},
          "operator": {"robust_controller": "M"}}
LEVEL = {"M": "MUST", "S": "SHOULD"}
METADATA = {"platformName": "Example GPU Platform", "platformVersion": "1.0",
            "vendorName": "Example", "websiteUrl": "https://example.com",
            "repoUrl": "https://example.com/repo", "documentationUrl": "https://example.com/docs",
            "productLogoUrl": "https://example.com/logo.svg", "description": "A GPU platform",
            "contactEmailAddress": "team@example.com",
            "k8sConformanceUrl": "https://github.com/cncf/k8s-conformance/tree/master/v1.37/x"}


def expected_items(version: str) -> dict[str, dict[str, str]]:
    """The version's categories in checklist order: its own where it differs, else COMMON."""
    own = ITEMS[version]
    return {cat: own.get(cat, COMMON.get(cat, {}))
            for cat in ("accelerators", "networking", "schedulingOrchestration",
                        "observability", "security", "operator")}


@pytest.mark.parametrize("version", product.VERSIONS)
def test_checklist_item_sets_and_levels_by_version(version):
    spec = product.checklist(version)["spec"]
    got = {cat: {i["id"]: i["level"] for i in items} for cat, items in spec.items()}
    want = {cat: {i: LEVEL[lv] for i, lv in items.items()}
            for cat, items in expected_items(version).items()}
    assert got == want


def test_descriptions_are_the_versions_own():
    def desc(version: str, item: str) -> str:
        return next(i["description"] for items in product.checklist(version)["spec"].values()
                    for i in items if i["id"] == item)

    assert "makes they available" in desc("1.37", "accelerator_metrics")  # upstream's typo
    for version in ("1.33", "1.34", "1.35", "1.36"):
        assert "makes them available" in desc(version, "accelerator_metrics")
    assert desc("1.33", "dra_support").startswith("Support Dynamic Resource Allocation (DRA)")


@pytest.mark.parametrize("version", product.VERSIONS)
def test_draft_copies_id_description_level_unchanged_in_order(version):
    doc = product.draft(make_results(), version)
    template = product.checklist(version)
    assert list(doc["spec"]) == list(template["spec"])
    for cat, items in template["spec"].items():
        assert [(i["id"], i["description"], i["level"]) for i in doc["spec"][cat]] == \
               [(i["id"], i["description"], i["level"]) for i in items]
    # what render writes reads back the same
    assert yaml.safe_load(product.render(doc, version, "r1")) == doc


def test_statuses_are_proposed_from_the_run():
    results = make_results(verdicts={"STACK-DP-002": "fail"})
    doc = product.draft(results, "1.37")
    rollup = {i["id"]: i for i in cncf.rollup(results["requirements"])["items"]}
    for items in doc["spec"].values():
        for item in items:
            if item["id"] in rollup:
                assert item["status"] == rollup[item["id"]]["status"]
                assert item["evidence"] == list(product.EVIDENCE_FILES)
                assert "#cncf" in item["notes"] and rollup[item["id"]]["basis"] in item["notes"]
            else:
                assert item["status"] == "" and item["evidence"] == []
                assert item["notes"] == product.NOT_CHECKED_NOTE
    sec = next(i for i in doc["spec"]["security"] if i["id"] == "secure_accelerator_access")
    assert sec["status"] in (cncf.PARTIAL, cncf.NOT_IMPLEMENTED)
    assert "#req-stack-dp-002" in sec["notes"]


def test_not_applicable_items_carry_notes(tmp_path):
    sharing = [r.id for r in REQUIREMENTS if "gpu_sharing" in r.cncf]
    results = make_results(verdicts={r: "not-applicable" for r in sharing})
    doc = product.draft(results, "1.36")
    item = next(i for i in doc["spec"]["accelerators"] if i["id"] == "gpu_sharing")
    assert item["status"] == cncf.NOT_APPLICABLE and item["notes"]


def test_evidence_url_links_the_report_sections():
    doc = product.draft(make_results(), "1.37", evidence_url="https://ci.example.com/run/7/")
    item = next(i for i in doc["spec"]["observability"] if i["id"] == "accelerator_metrics")
    assert item["evidence"][0] == "https://ci.example.com/run/7/report/report.html#cncf"
    assert "https://ci.example.com/run/7/report/report.html#req-stack-dcgm-002" in \
        item["evidence"]
    assert item["evidence"][-2:] == ["https://ci.example.com/run/7/junit.xml",
                                     "https://ci.example.com/run/7/e2e.log"]


# --- validate.go ---------------------------------------------------------------------------------
def submission(tmp_path: Path, version: str, results=None) -> Path:
    """A bundle at vX.Y/<product>/ as a submission is laid out, with metadata filled in."""
    run = results_folder(tmp_path / "run", results or make_results())
    folder = tmp_path / f"v{version}" / "example"
    meta = {**METADATA, "k8sConformanceUrl":
            f"https://github.com/cncf/k8s-conformance/tree/master/v{version}/example"}
    bundle.write_bundle(run, folder, product_version=version, product_metadata=meta)
    return folder / "PRODUCT.yaml"


def complete(path: Path) -> None:
    """What the vendor does: every unchecked item gets a status and evidence."""
    doc = yaml.safe_load(path.read_text())
    for items in doc["spec"].values():
        for item in items:
            if item["status"] != cncf.IMPLEMENTED:
                item.update(status=cncf.IMPLEMENTED, evidence=["https://example.com/evidence"],
                            notes="")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.parametrize("version", product.VERSIONS)
def test_a_completed_draft_passes_the_submission_checks(tmp_path, version):
    path = submission(tmp_path, version)
    left = product.submission_errors(path)
    must_open = {i["id"] for items in product.checklist(version)["spec"].values() for i in items
                 if i["level"] == "MUST"}
    # the draft itself: only what a person must decide is left (MUST items not Implemented)
    assert left and all(any(f"'{m}'" in e for m in must_open) for e in left), left
    complete(path)
    assert product.submission_errors(path) == []


def test_the_draft_of_a_sim_run_names_what_is_left(tmp_path):
    path = submission(tmp_path, "1.37")
    left = product.submission_errors(path)
    # every MUST has a check (no status ''); what the sim run did not pass whole is named
    assert not any("status is ''" in e for e in left), left
    assert ("Requirement 'robust_controller' is MUST level but status is 'Partially "
            "Implemented'. It must be 'Implemented'.") in left
    assert not any("virtualized_accelerator" in e for e in left)  # SHOULD, empty: allowed


def test_each_mistake_validate_go_catches_is_caught(tmp_path):
    path = submission(tmp_path, "1.37")
    complete(path)
    good = yaml.safe_load(path.read_text())

    def errors_after(change) -> list[str]:
        doc = yaml.safe_load(yaml.safe_dump(good))
        change(doc)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return product.submission_errors(path)

    def item(doc, item_id):
        return next(i for items in doc["spec"].values() for i in items if i["id"] == item_id)

    assert errors_after(lambda d: d["spec"].pop("operator")) == [
        "Missing spec category: operator"]
    assert errors_after(lambda d: d["spec"]["security"].pop()) == [
        "Missing requirement 'workload_sandboxing' in category 'security'"]
    assert errors_after(lambda d: item(d, "gpu_sharing").update(status="Done")) == [
        "Invalid status 'Done' for 'gpu_sharing'. Must be one of "
        "[Implemented Not Implemented Partially Implemented N/A]"]
    assert errors_after(lambda d: item(d, "gang_scheduling").update(
        status="Partially Implemented")) == [
        "Requirement 'gang_scheduling' is MUST level but status is 'Partially Implemented'. "
        "It must be 'Implemented'."]
    assert errors_after(lambda d: item(d, "gpu_sharing").update(status="N/A", notes="")) == [
        "Notes required for 'gpu_sharing' when status is N/A"]
    missing = errors_after(lambda d: item(d, "gpu_sharing").update(
        evidence=["report/report.html#cncf"]))
    assert len(missing) == 1 and missing[0].startswith(
        "Invalid evidence file for 'gpu_sharing': report/report.html#cncf")
    assert errors_after(lambda d: d["metadata"].update(vendorName="[Vendor Name]")) == [
        "Metadata field vendorName has placeholder value: [Vendor Name]"]
    assert errors_after(lambda d: d["metadata"].pop("contactEmailAddress")) == [
        "Missing metadata field: contactEmailAddress (or contact_email_address)"]
    assert errors_after(lambda d: d["metadata"].update(
        productLogoUrl="https://example.com/logo.png")) == [
        "productLogoUrl must link to an SVG, EPS, or AI file: https://example.com/logo.png"]
    assert errors_after(lambda d: d["metadata"].update(
        k8sConformanceUrl="https://example.com/x"))[0].startswith(
        "Invalid k8sConformanceUrl format: https://example.com/x.")
    # snake_case metadata keys are accepted as validate.go accepts them
    assert errors_after(lambda d: d["metadata"].update(
        contact_email_address=d["metadata"].pop("contactEmailAddress"))) == []


def test_local_evidence_must_exist_beside_product_yaml(tmp_path):
    path = submission(tmp_path, "1.36")
    complete(path)
    assert product.submission_errors(path) == []
    shutil.rmtree(path.parent / "report")
    doc = yaml.safe_load(path.read_text())
    for items in doc["spec"].values():
        for i in items:
            if i["id"] == "accelerator_metrics":
                i["evidence"] = list(product.EVIDENCE_FILES)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert any("report/report.html (not found" in e for e in product.submission_errors(path))


def test_version_from_the_path_as_validate_go(tmp_path):
    path = tmp_path / "PRODUCT.yaml"
    path.write_text("metadata: {}\nspec: {}\n")
    assert product.submission_errors(path)[0].startswith("Error: Could not determine version")
    other = tmp_path / "v1.99" / "x" / "PRODUCT.yaml"
    other.parent.mkdir(parents=True)
    other.write_text("metadata: {}\n")
    assert product.submission_errors(other) == [
        "Error: Schema not found at docs/AIConformance-1.99.yaml"]


def test_metadata_file_and_bad_input(tmp_path):
    meta = tmp_path / "meta.yaml"
    meta.write_text(yaml.safe_dump({"metadata": METADATA}))
    assert product.load_metadata(meta)["vendorName"] == "Example"
    meta.write_text("- a list\n")
    from conformance.report.errors import ReportInputError

    with pytest.raises(ReportInputError, match="must be a mapping"):
        product.load_metadata(meta)
    with pytest.raises(ReportInputError, match="unknown CNCF AI Conformance checklist"):
        product.checklist("1.32")
