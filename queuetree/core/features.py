"""Feature gates known to queuetree and their defaults.

``SchedulingGatesQueueAdmission`` is on by default in queuetree (Volcano: alpha, off), because
the scheduling gate is how queuetree admits pods; turning it off leaves pods ungated and makes the
operator a pure queue controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

SCHEDULING_GATES_QUEUE_ADMISSION = "SchedulingGatesQueueAdmission"

DEFAULTS: Mapping[str, bool] = MappingProxyType({SCHEDULING_GATES_QUEUE_ADMISSION: True})


def resolve(overrides: Mapping[str, bool]) -> Mapping[str, bool]:
    """The defaults with ``overrides`` applied; unknown names are the caller's error to report."""
    return MappingProxyType({**DEFAULTS, **overrides})
