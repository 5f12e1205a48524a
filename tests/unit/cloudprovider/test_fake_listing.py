"""The simulated cloud's instance listing is kept between changes and follows every change."""

from __future__ import annotations

from typing import Any

from karpy.cloudprovider.fake import capacity


class _Inst:
    def __init__(self, iid: str, launched: float, mine: bool = True) -> None:
        self.instance_id, self.launch_time, self.provider_id, self.mine = iid, launched, f"aws:///{iid}", mine


def _listed(live: Any, calls: list[str]) -> list[str]:
    def claim(i: Any) -> Any:
        calls.append(i.instance_id)
        return i.instance_id
    out: list[str] = live.listing(lambda i: bool(i.mine), claim)
    return out


def test_the_listing_is_built_once_until_an_instance_is_added_replaced_or_removed() -> None:
    live: Any = capacity.LiveInstances()
    calls: list[str] = []
    live["b"] = _Inst("i-b", 2.0)
    live["a"] = _Inst("i-a", 1.0)
    live["x"] = _Inst("i-x", 0.5, mine=False)
    assert _listed(live, calls) == ["i-a", "i-b"]
    assert _listed(live, calls) == ["i-a", "i-b"]
    assert calls == ["i-a", "i-b"]  # the second listing is the kept one
    first = _listed(live, calls)
    first.append("mutated by a caller")
    assert _listed(live, calls) == ["i-a", "i-b"]
    live["c"] = _Inst("i-c", 0.1)
    assert _listed(live, calls) == ["i-c", "i-a", "i-b"]
    live["a"] = _Inst("i-a", 3.0)  # replaced: launched later now
    assert _listed(live, calls) == ["i-c", "i-b", "i-a"]
    del live["b"]
    assert _listed(live, calls) == ["i-c", "i-a"]
