"""The YAML loader remembers a plain scalar's tag by its text: the same text quoted or plain, in any
order, still reads as YAML says."""

from __future__ import annotations

from karpy.api import manifest


def test_a_remembered_plain_scalar_and_the_same_text_quoted_keep_their_own_types() -> None:
    text = "a: 123\nb: '123'\nc: 123\nd: 2026-01-01\ne: true\nf: 'true'\ng: 1.5\nh: '1.5'\ni: null\nj: ''\n"
    for _ in range(2):  # the second time every tag comes from the cache
        (doc,) = manifest.parse_yaml(text)
        assert doc == {"a": 123, "b": "123", "c": 123, "d": "2026-01-01", "e": True, "f": "true", "g": 1.5,
                       "h": "1.5", "i": None, "j": ""}


def test_the_cache_of_tags_stays_bounded() -> None:
    text = "\n".join(f"k{i}: v{i}" for i in range(500))
    manifest._RESOLVED.clear()
    limit = manifest._RESOLVED_MAX
    try:
        manifest._RESOLVED_MAX = 100
        (doc,) = manifest.parse_yaml(text)
        assert doc["k499"] == "v499"
        assert len(manifest._RESOLVED) <= 100
    finally:
        manifest._RESOLVED_MAX = limit
