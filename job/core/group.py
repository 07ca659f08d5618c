"""A resource group as the store holds it: one model for the store, the scheduler and the CLI, from
which the planner's `Group` is made. Its options, their defaults and their checks are GroupSpec's
(what `group add` and `group set` accept); the row adds what the tick keeps of its own."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from job.core.errors import InvalidRow
from job.core.planner.snapshot import Group, describe_error
from job.core.specs import ClusterSpec, GroupSpec

OPTIONS = tuple(GroupSpec.model_fields)


class GroupConfig(GroupSpec):
    # When usage was last charged (the tick's, never an option), and the row's own times.
    usage_charged_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> GroupConfig:
        """A stored row, taken as it is: checked when it was written, and a row written around `group
        set` must fail its own tick (e.g. its node types), not the reading of every group."""
        fields = {name: row[name] for name in cls.model_fields}
        clusters = fields["clusters"]
        if isinstance(clusters, list):
            fields["clusters"] = [ClusterSpec.model_construct(**c) if isinstance(c, dict) else c for c in clusters]
        return cls.model_construct(**fields)

    def check(self) -> None:
        """Raises InvalidRow, naming the first field `group set` would refuse and its value."""
        try:
            GroupSpec.model_validate(self.options())
        except ValidationError as exc:
            loc = exc.errors(include_url=False)[0]["loc"]
            field = str(loc[0]) if loc else ""
            value = repr(getattr(self, field, None))[:200]
            raise InvalidRow(f"group {self.name}: {describe_error(exc)}", field, value) from None

    def options(self) -> dict[str, Any]:
        """The options alone, as `group set` takes them (the clusters as their fields: checked again)."""
        options = {name: getattr(self, name) for name in OPTIONS}
        options["clusters"] = [c.model_dump() if isinstance(c, ClusterSpec) else c for c in self.clusters]
        return options

    def cluster(self, name: str | None) -> ClusterSpec:
        """The cluster of that name; None (a job placed before clusters had names): the first."""
        return next((c for c in self.clusters if c.name == name), self.clusters[0])

    @cached_property
    def class_names(self) -> frozenset[str]:
        return frozenset(c["name"] for c in self.priority_classes)

    def job_class(self, priority_class: str | None) -> str:
        """A job's class: its own, else the group's default."""
        return priority_class or self.default_class

    def preemptible(self, priority_class: str | None) -> bool:
        """Whether a job of this class may be stopped to make room; a class dropped since the job
        was queued (see group_snapshot) is not."""
        job_class = self.job_class(priority_class)
        return any(c["preemptible"] for c in self.priority_classes if c["name"] == job_class)

    def planner_group(self) -> dict[str, Any]:
        """The planner's group options: GroupSpec fields of the same names."""
        return {option: getattr(self, option) for option in Group.model_fields}
