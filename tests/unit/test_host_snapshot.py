"""The node tests' host snapshot (tests/node/hostsnap.py) leaves other tools' network to them: a
kind cluster that Podman runs beside the node (tests/integration/test_kind.py, on another xdist
worker) adds a bridge, a veth into its container's network namespace and that namespace's
mount; none is the node's, and a snapshot that counted them failed the interrupted `node up`
test (CI). The lines are `ip -o link show`'s, as this host printed them with a kind cluster up."""

from __future__ import annotations

import pytest

from tests.node import hostsnap

PODMAN_BRIDGE = ("5939: podman1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP "
                 "mode DEFAULT group default qlen 1000\\    link/ether ce:83:90:25:8d:55")
KIND_VETH = ("5940: veth0@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue master "
             "podman1 state UP mode DEFAULT group default qlen 1000\\    link/ether "
             "ce:83:90:25:8d:55 brd ff:ff:ff:ff:ff:ff link-netns "
             "netns-1147082a-a328-d652-0099-a453aeeb3f54")
NODE_BRIDGE = ("7: gpuconf0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP "
               "mode DEFAULT group default qlen 1000\\    link/ether 7a:1c:5e:00:00:01")
NODE_VETH = ("8: veth3f2a1b9c@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue master "
             "gpuconf0 state UP mode DEFAULT group default qlen 1000\\    link/ether "
             "5e:aa:01:02:03:04 brd ff:ff:ff:ff:ff:ff link-netns cni-0b1c2d3e")


@pytest.mark.parametrize("name, line, others", [
    ("podman1", PODMAN_BRIDGE, True),
    ("veth0", KIND_VETH, True),
    ("gpuconf0", NODE_BRIDGE, False),
    ("veth3f2a1b9c", NODE_VETH, False),
], ids=["podman-bridge", "kind-veth", "node-bridge", "node-veth"])
def test_only_podmans_links_are_left_to_podman(name, line, others):
    assert hostsnap._other_tools_link(name, line) is others


def test_podmans_network_namespaces_are_its_own_and_containerds_are_the_nodes():
    assert "/run/netns/netns-1147082a".startswith(hostsnap.OTHER_TOOLS_MOUNTS)
    assert not "/run/netns/cni-0b1c2d3e".startswith(hostsnap.OTHER_TOOLS_MOUNTS)
