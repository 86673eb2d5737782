"""accelerator_metrics as the ai-conformance test checks it: per-accelerator utilization and
memory series (a device label on each), found by DCGM name or by name pattern; temperature,
power and interconnect reported when present, never required."""

from __future__ import annotations

from conformance.checks import accelerator_metrics as am

DCGM = """# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",pci_bus_id="00000000:18:00.0",Hostname="n0"} 3
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",pci_bus_id="00000000:2A:00.0",Hostname="n0"} 0
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",Hostname="n0"} 120
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",Hostname="n0"} 0
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 34
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 71.2
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{gpu="0",UUID="GPU-a"} 0
go_goroutines 42
"""


def test_parse_reads_names_and_labels_as_the_go_test():
    samples = am.parse('m{a="x,y",b="q\\"z"} 1\nplain 2\n# c\n\nbroken{a="1" 3\n')
    assert [(s.name, s.labels) for s in samples] == [
        ("m", {"a": "x,y", "b": 'q\\"z'}), ("plain", {})]


def test_dcgm_exporter_output_passes_with_its_should_metrics():
    report = am.check(DCGM)
    assert report.missing() == []
    assert report.utilization == {"DCGM_FI_DEV_GPU_UTIL": {"UUID=GPU-a", "UUID=GPU-b"}}
    assert report.memory == {"DCGM_FI_DEV_FB_USED": {"UUID=GPU-a", "UUID=GPU-b"}}
    assert set(report.optional["temperature"]) == {"DCGM_FI_DEV_GPU_TEMP"}
    assert set(report.optional["power"]) == {"DCGM_FI_DEV_POWER_USAGE"}
    assert set(report.optional["interconnect"]) == {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"}
    assert report.as_dict()["utilization"] == {"DCGM_FI_DEV_GPU_UTIL": 2}


def test_series_without_a_device_label_do_not_count():
    text = "DCGM_FI_DEV_GPU_UTIL{Hostname=\"n0\"} 3\nDCGM_FI_DEV_FB_USED{Hostname=\"n0\"} 1\n"
    assert am.check(text).missing() == ["utilization", "memory"]


def test_name_patterns_when_no_exact_name_is_given():
    amd = ('amd_gpu_gfx_activity{card_id="0"} 5\namd_gpu_used_vram{card_id="0"} 9\n'
           'amd_gpu_edge_temperature{card_id="0"} 40\n')
    assert am.check(amd).missing() == ["utilization", "memory"]  # not the DCGM names
    report = am.check(amd, utilization_metric=None, memory_metric=None)
    assert report.missing() == ["utilization"]  # "gfx_activity" matches no util pattern
    assert report.memory == {"amd_gpu_used_vram": {"card_id=0"}}
    assert report.optional["power"] == {}
    assert "power: none exposed" in report.optional_summary()


def test_mig_instances_are_distinct_devices():
    text = ('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",GPU_I_ID="1"} 1\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",GPU_I_ID="2"} 1\n')
    assert am.check(text).utilization["DCGM_FI_DEV_GPU_UTIL"] == {"UUID=GPU-a/1",
                                                                  "UUID=GPU-a/2"}
