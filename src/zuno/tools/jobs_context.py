"""Registers the Jobs section of the dynamic context (``zuno.jobs.projection``)."""

from __future__ import annotations

from zuno.jobs.projection import jobs_section
from zuno.surface import Registry


def register(registry: Registry) -> None:
    if not any(name == "jobs" for name, _ in registry.refreshers):
        registry.refreshers.append(("jobs", jobs_section))
