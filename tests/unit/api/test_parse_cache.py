"""parse_cache.remember: the one rule of the bounded caches of successful parses by text behind
quantities, timestamps and ``expireAfter``."""

from __future__ import annotations

import pytest

from karpy.api import fields, meta, nodeclaim, parse_cache, quantity


def test_a_full_cache_is_emptied_before_the_next_entry() -> None:
    cache: dict[str, int] = {}
    assert parse_cache.remember(cache, 2, "a", 1) == 1
    parse_cache.remember(cache, 2, "b", 2)
    assert cache == {"a": 1, "b": 2}
    parse_cache.remember(cache, 2, "c", 3)
    assert cache == {"c": 3}


def test_a_cache_of_no_entries_is_refused_with_the_size_found() -> None:
    with pytest.raises(ValueError, match="size must be a positive number of entries, found 0"):
        parse_cache.remember({}, 0, "a", 1)


def test_the_three_parsers_remember_what_parsed_and_never_what_failed() -> None:
    quantity._MILLI_CACHE.clear()
    assert quantity.parse_milli("3Gi") == 3 * 1024**3 * 1000
    assert quantity._MILLI_CACHE == {"3Gi": 3 * 1024**3 * 1000}
    with pytest.raises(quantity.QuantityError):
        quantity.parse_milli("3 apples")
    assert "3 apples" not in quantity._MILLI_CACHE

    stamp = "2026-03-04T05:06:07Z"
    read = meta.ObjectMeta.parse(fields.Fields({"name": "x", "creationTimestamp": stamp}, "Pod"),
                                 namespaced=True).creation_timestamp
    assert meta._TIMES[stamp] == read

    assert nodeclaim.read_expire_after(fields.Fields({"expireAfter": "Never"}, "NodePool")) is None
    assert "Never" in nodeclaim._EXPIRE_AFTER and nodeclaim._EXPIRE_AFTER["Never"] is None
    assert (quantity.MILLI_CACHE_SIZE, meta.TIMES_SIZE, nodeclaim.EXPIRE_AFTER_SIZE) == (16384, 16384, 1024)
