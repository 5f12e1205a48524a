"""A typed reader over a manifest (a plain dict as YAML or the API server gives it).

``Fields`` walks nested mappings while keeping the object's name and the field path, so that every
type error it raises is a :class:`karpy.api.errors.ValidationError` naming object, path, expected
and found. Parsers in :mod:`karpy.api` use it instead of indexing dicts by hand.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from karpy.api import errors


class Fields:
    """Read fields of one mapping at ``path`` inside object ``obj``.

    ``obj`` may be given as a function that names the object: it is called only when a message
    needs the name (a valid object is read without ever naming it)."""

    __slots__ = ("_obj", "data", "path")

    def __init__(self, data: Any, obj: str | Callable[[], str], path: str = "") -> None:
        if data is None:
            data = {}
        self._obj = obj
        if type(data) is not dict and not isinstance(data, Mapping):
            raise errors.ValidationError.single(self.obj, path or "(root)", "a mapping", data)
        self.data: Mapping[str, Any] = data
        self.path = path

    @property
    def obj(self) -> str:
        """The name of the object read, for messages (e.g. ``Pod default/web``)."""
        name = self._obj
        if type(name) is not str:
            name = self._obj = name()  # type: ignore[operator]
        return name

    def at(self, key: str | int) -> str:
        """The field path of ``key`` below this mapping."""
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        if not key:  # an empty key is named, not lost in a trailing dot
            return f'{self.path}[""]'
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str | int, expected: str, found: Any) -> errors.ValidationError:
        return errors.ValidationError.single(self.obj, self.at(key), expected, found)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def sub(self, key: str) -> Fields:
        """The nested mapping at ``key`` (an empty one when absent)."""
        return Fields(self.data.get(key), self._obj, self.at(key))

    def str(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.data.get(key)
        if type(value) is builtins.str:  # the common case first
            return value
        if value is None:
            if required:
                raise self.fail(key, "a string", None)
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(key, "a string", value)
        return str(value)

    def req_str(self, key: builtins.str) -> builtins.str:
        value = self.str(key, required=True)
        assert value is not None
        return value

    def int(self, key: builtins.str, default: builtins.int | None = None, *,
            required: builtins.bool = False) -> builtins.int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.fail(key, "an integer", None)
            return default
        if isinstance(value, bool):
            raise self.fail(key, "an integer", value)
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        raise self.fail(key, "an integer", value)

    def bool(self, key: builtins.str, default: builtins.bool | None = None) -> builtins.bool | None:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise self.fail(key, "true or false", value)

    def str_map(self, key: builtins.str) -> dict[builtins.str, builtins.str]:
        """A mapping of strings to strings (labels, annotations, nodeSelector, tags)."""
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(key, "a mapping of strings", value)
        out: dict[builtins.str, builtins.str] = {}
        for k, v in value.items():
            if type(k) is builtins.str and type(v) is builtins.str:
                out[k] = v
                continue
            if v is None or isinstance(v, Mapping | list):
                raise errors.ValidationError.single(self.obj, f"{self.at(key)}.{k}", "a string", v)
            out[str(k)] = "true" if v is True else "false" if v is False else str(v)
        return out

    def list(self, key: builtins.str) -> builtins.list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(key, "a list", value)
        return value

    def str_list(self, key: builtins.str) -> builtins.list[builtins.str]:
        value = self.list(key)
        if all(type(v) is builtins.str for v in value):  # the common case: nothing to convert
            return builtins.list(value)
        out: builtins.list[builtins.str] = []
        for i, v in enumerate(value):
            if v is None or isinstance(v, Mapping | list | bool):
                raise errors.ValidationError.single(self.obj, f"{self.at(key)}[{i}]", "a string", v)
            out.append(str(v))
        return out

    def items(self, key: builtins.str) -> Iterator[Fields]:
        """Each element of the list at ``key`` as a mapping reader, with ``key[i]`` paths."""
        path = self.at(key)
        for i, v in enumerate(self.list(key)):
            yield Fields(v, self._obj, f"{path}[{i}]")
