"""Scheduler configuration: actions and tiers of plugins, as in ``volcano-scheduler.conf``.

``queuetree.api`` parses the YAML file into these records; the session reads only them.
Flags use Volcano's exact spellings (including the irregular ``enabledAllocatable``,
``enabledOverused`` and ``enabledVictim``). A flag left out means enabled, except
``enableHierarchy``, which is off unless set to true (Volcano's ``EnabledHierarchy`` is nil → off).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def _empty_mapping() -> Mapping[str, Any]:
    """The shared empty read-only mapping (Python 3.11 refuses a mappingproxy as a default)."""
    return _EMPTY


_EMPTY: Mapping[str, Any] = MappingProxyType({})

KNOWN_FLAGS = (
    "enableJobOrder",
    "enableTaskOrder",
    "enableQueueOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enableJobReady",
    "enableJobPipelined",
    "enableJobStarving",
    "enablePredicate",
    "enableNodeOrder",
    "enableBestNode",
    "enablePreemptive",
    "enableJobEnqueued",
    "enableHierarchy",
    "enabledAllocatable",
    "enabledOverused",
    "enabledVictim",
)
FLAG_ALIASES = {
    "enableAllocatable": "enabledAllocatable",
    "enableOverused": "enabledOverused",
    "enableVictim": "enabledVictim",
}
"""The regular spelling of the three irregular flags, accepted as an alias."""
OFF_UNLESS_SET = frozenset({"enableHierarchy"})


@dataclasses.dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    flags: Mapping[str, bool] = dataclasses.field(default_factory=_empty_mapping)
    """Canonical flag name -> value, only for flags the file sets."""
    arguments: Mapping[str, object] = dataclasses.field(default_factory=_empty_mapping)

    def enabled(self, flag: str) -> bool:
        """Whether ``flag`` (canonical spelling) is on: a flag left out is on, but hierarchy."""
        value = self.flags.get(flag)
        if value is None:
            return flag not in OFF_UNLESS_SET
        return value


@dataclasses.dataclass(frozen=True, slots=True)
class Tier:
    plugins: tuple[PluginOption, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class SchedulerConfiguration:
    actions: tuple[str, ...] = ("enqueue", "allocate", "backfill")
    tiers: tuple[Tier, ...] = ()
    device_classes: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    """DRA device class -> the resource name its devices are charged to queues as
    (``deviceClassMappings``; ``core.devices``). Empty: devices through claims charge nothing."""

    def plugin(self, name: str) -> PluginOption | None:
        """The first option for plugin ``name`` across the tiers, if configured."""
        for tier in self.tiers:
            for option in tier.plugins:
                if option.name == name:
                    return option
        return None
