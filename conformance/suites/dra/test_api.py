"""DRA / the API and the driver's DeviceClasses.

Checklist (KEP-4381: resource.k8s.io/v1 is GA and served by default since 1.34; the chart's
templates/deviceclass-*.yaml of dra-driver-nvidia-gpu v0.4.1):
- DRA-API-001 resource.k8s.io/v1 is served (the feature gates the API server reports are
  recorded, from its metrics where this identity may read them); DeviceClasses gpu.nvidia.com
  and mig.nvidia.com exist, every NVIDIA DeviceClass selects what upstream selects, and
  extendedResourceName, where set, is nvidia.com/gpu on gpu.nvidia.com only
"""

from __future__ import annotations

import pytest

from conformance.checks import dra as rules
from conformance.cluster import evidence as ev
from conformance.nvidia import dra
from conformance.plugin.api import finding


@pytest.mark.requirement("DRA-API-001")
def test_api_served_and_device_classes_upstream(request, require_dra, attachments):
    view = require_dra
    attachments.append(ev.Evidence("deviceclasses.yaml", ev.to_yaml(view.nvidia_classes)))
    attachments.append(ev.Evidence("api.txt", f"resource.k8s.io versions served: "
                                           f"{', '.join(view.api_versions) or 'none'}\n"
                                           f"{view.gates_text()}"))
    assert view.served, (f"{dra.RESOURCE_API} is not served (served: "
                         f"{', '.join(view.api_versions) or 'none'}), yet the NVIDIA DRA driver "
                         "is installed: it is the GA API since Kubernetes 1.34; check the API "
                         "server's --runtime-config")
    problems = rules.class_problems(view.classes)
    assert not problems, "NVIDIA DeviceClasses differ from the driver's: " + "; ".join(problems)
    mapped = rules.extended_resource_classes(view.classes)
    finding(request, f"{dra.RESOURCE_API} served; {len(view.nvidia_classes)} NVIDIA "
                     f"DeviceClass(es) as upstream; nvidia.com/gpu mapped by "
                     f"{', '.join(mapped) or 'no DeviceClass'}; {view.gates_text()}")
