"""Errors raised for bad input.

Every error names the object (``kind/name`` or ``document 3``), the field path inside it, what was
expected and what was found, so a user can fix the manifest without reading karpy's code.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem in one field of one object."""

    obj: str
    """The object, e.g. ``NodePool/default`` or ``document 2 (Provisioner/default)``."""
    path: str
    """Dotted field path inside the object, e.g. ``spec.template.spec.requirements[0].operator``."""
    expected: str
    """What a valid value looks like, in words."""
    found: Any
    """The value that was found (``None`` when the field is missing)."""

    def __str__(self) -> str:
        return f"{self.obj}: {self.path}: expected {self.expected}, found {describe(self.found)}"


def describe(value: Any) -> str:
    """A short, quoted rendering of a found value for error messages."""
    if value is None:
        return "nothing"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"  # repr may refuse it
    try:
        text = repr(value)
    except RecursionError:  # a value nested too deeply to print
        text = reprlib.repr(value)
    except ValueError:  # an integer with more digits than Python prints, inside a container
        text = f"({type(value).__name__})"
    if len(text) > 80:
        text = text[:77] + "..."
    return text


class ValidationError(ValueError):
    """One or more :class:`FieldError` found while reading or validating an object.

    A validation error is never retryable: the input must change.
    """

    retryable = False

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__("; ".join(str(e) for e in self.errors) or "invalid object")

    @classmethod
    def single(cls, obj: str, path: str, expected: str, found: Any) -> ValidationError:
        return cls([FieldError(obj, path, expected, found)])
