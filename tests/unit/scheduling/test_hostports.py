"""Host port usage on a node: Kubernetes' collision rules, add/remove, copies."""

from __future__ import annotations

import pytest

from karpy.scheduling import hostports

hp = hostports.host_port


def test_host_ports_default_the_ip_and_protocol_like_the_api_does() -> None:
    assert hp("", "", 8080) == hostports.HostPort("0.0.0.0", "TCP", 8080)
    assert hp(None, None, 53) == hostports.HostPort("0.0.0.0", "TCP", 53)
    assert hp("::ffff:10.0.0.1", "UDP", 53) == hostports.HostPort("10.0.0.1", "UDP", 53)
    assert hp("2001:DB8::1", "TCP", 80).ip == "2001:db8::1"
    assert str(hp("10.0.0.1", "TCP", 80)) == "10.0.0.1:80/TCP"


def test_bad_host_ports_raise_value_error() -> None:
    with pytest.raises(ValueError, match="hostIP must be an IP address, got 'localhost'"):
        hp("localhost", "TCP", 80)
    with pytest.raises(ValueError, match="between 0 and 65535, got 70000"):
        hp("", "TCP", 70000)


@pytest.mark.parametrize(
    ("held", "wanted", "collide"),
    [
        (hp("10.0.0.1", "TCP", 80), hp("10.0.0.1", "TCP", 80), True),
        (hp("10.0.0.1", "TCP", 80), hp("10.0.0.2", "TCP", 80), False),
        (hp("10.0.0.1", "TCP", 80), hp("10.0.0.1", "UDP", 80), False),
        (hp("10.0.0.1", "TCP", 80), hp("10.0.0.1", "TCP", 81), False),
        (hp("", "TCP", 80), hp("10.0.0.1", "TCP", 80), True),
        (hp("10.0.0.1", "TCP", 80), hp("", "TCP", 80), True),
        (hp("::", "TCP", 80), hp("10.0.0.1", "TCP", 80), True),
        (hp("0.0.0.0", "TCP", 80), hp("::", "TCP", 80), True),
        (hp("", "UDP", 80), hp("", "TCP", 80), False),
    ],
)
def test_two_host_ports_collide_on_the_same_protocol_and_port_unless_both_ips_are_specific_and_differ(
        held: hostports.HostPort, wanted: hostports.HostPort, collide: bool) -> None:
    assert hostports.collides(held, wanted) is collide
    usage = hostports.HostPortUsage()
    usage.add("default/a", [held])
    assert (usage.conflicts([wanted]) is not None) is collide


def test_conflicts_returns_the_held_entry_in_the_way() -> None:
    usage = hostports.HostPortUsage()
    usage.add("default/a", [hp("10.0.0.1", "TCP", 80), hp("", "UDP", 53)])
    assert usage.conflicts([hp("10.0.0.9", "TCP", 443), hp("", "TCP", 80)]) == hp("10.0.0.1", "TCP", 80)
    assert usage.conflicts([hp("10.0.0.1", "UDP", 53)]) == hp("0.0.0.0", "UDP", 53)
    assert usage.conflicts([hp("10.0.0.9", "TCP", 443)]) is None


def test_a_pods_own_ports_do_not_conflict_with_themselves() -> None:
    usage = hostports.HostPortUsage()
    usage.add("default/a", [hp("", "TCP", 80)])
    assert usage.conflicts([hp("", "TCP", 80)], pod_key="default/a") is None
    assert usage.conflicts([hp("", "TCP", 80)], pod_key="default/b") is not None


def test_removing_a_pod_frees_its_ports() -> None:
    usage = hostports.HostPortUsage()
    usage.add("default/a", [hp("", "TCP", 80)])
    usage.add("default/b", [hp("10.0.0.1", "TCP", 81)])
    usage.remove("default/a")
    usage.remove("default/unknown")
    assert usage.conflicts([hp("", "TCP", 80)]) is None
    assert usage.conflicts([hp("", "TCP", 81)]) == hp("10.0.0.1", "TCP", 81)
    assert usage.pods() == frozenset({"default/b"})
    assert len(usage) == 1


def test_adding_a_pod_again_replaces_what_it_held() -> None:
    usage = hostports.HostPortUsage()
    usage.add("default/a", [hp("", "TCP", 80)])
    usage.add("default/a", [hp("", "TCP", 81)])
    assert usage.conflicts([hp("", "TCP", 80)]) is None
    assert usage.conflicts([hp("", "TCP", 81)]) is not None
    assert usage.ports_of("default/a") == (hp("", "TCP", 81),)


def test_port_zero_is_not_a_host_port() -> None:
    usage = hostports.HostPortUsage()
    usage.add("default/a", [hp("", "TCP", 0)])
    assert len(usage) == 0
    usage.add("default/b", [hp("", "TCP", 80)])
    assert usage.conflicts([hp("", "TCP", 0)]) is None


def test_a_copy_is_independent_of_the_original() -> None:
    usage = hostports.HostPortUsage()
    usage.add("default/a", [hp("", "TCP", 80)])
    branch = usage.copy()
    branch.add("default/b", [hp("", "TCP", 81)])
    branch.remove("default/a")
    assert usage.conflicts([hp("", "TCP", 80)]) is not None
    assert usage.conflicts([hp("", "TCP", 81)]) is None
    assert branch.conflicts([hp("", "TCP", 80)]) is None
    assert repr(usage) == "HostPortUsage(default/a: 0.0.0.0:80/TCP)"
