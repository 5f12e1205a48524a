"""Test-suite wide settings: the in-memory cluster checks that nobody changes its shared objects."""

from __future__ import annotations

from karpy.kube import memory

memory.CHECK_SHARED = True
