"""A recording fake of the operator's API writes, and small builders of core objects."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from queuetree.core import objects
from queuetree.operator import kube
from tests import timing

GATE = objects.QUEUE_ALLOCATION_GATE


@dataclasses.dataclass(frozen=True)
class Call:
    verb: str
    target: str
    body: Any


class FakeKube:
    """Records every call; ``fail`` maps a target to the HTTP statuses of its next answers."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.fail: dict[str, list[int]] = {}
        self.gate: asyncio.Event | None = None
        """When set, pod patches wait for it (to observe in-flight states)."""
        self.on_call: Callable[[Call], None] = lambda call: None
        self.objects: dict[str, Mapping[str, Any]] = {}
        """What :meth:`read` answers, by target (``pods/ns/name``, ``jobs/ns/name``)."""

    async def _record(self, verb: str, target: str, body: Any) -> None:
        call = Call(verb=verb, target=target, body=body)
        self.calls.append(call)
        self.on_call(call)
        statuses = self.fail.get(target)
        if statuses:
            status = statuses.pop(0)
            raise kube.ApiError(verb=verb, target=target, status=status, reason="Injected")

    async def patch_pod(
        self, namespace: str, name: str, patch: Sequence[Mapping[str, Any]]
    ) -> None:
        if self.gate is not None:
            await self.gate.wait()
        await self._record("patch", f"pods/{namespace}/{name}", list(patch))

    async def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        await self._record("annotate", f"pods/{namespace}/{name}", dict(annotations))

    async def evict_pod(self, namespace: str, name: str) -> None:
        await self._record("evict", f"pods/{namespace}/{name}", None)

    async def create_queue(self, body: Mapping[str, Any]) -> None:
        await self._record("create", f"queues/{body['metadata']['name']}", dict(body))

    async def patch_queue(self, name: str, patch: Mapping[str, Any]) -> None:
        await self._record("patch", f"queues/{name}", dict(patch))

    async def patch_queue_json(self, name: str, patch: Sequence[Mapping[str, Any]]) -> None:
        await self._record("patch-json", f"queues/{name}", list(patch))

    async def patch_queue_status(self, name: str, patch: Mapping[str, Any]) -> None:
        await self._record("patch", f"queues/{name}/status", dict(patch))

    async def patch_pod_group_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> None:
        await self._record("patch", f"podgroups/{namespace}/{name}/status", dict(patch))

    async def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        await self._record("create", f"events/{namespace}", dict(body))

    async def read(self, target: str, path: str) -> Mapping[str, Any]:
        await self._record("get", target, path)
        if target not in self.objects:
            raise kube.ApiError(verb="get", target=target, status=404, reason="NotFound")
        return self.objects[target]

    async def create_pod_group(self, namespace: str, body: Mapping[str, Any]) -> None:
        await self._record("create", f"podgroups/{namespace}/{body['metadata']['name']}", body)

    async def create(self, target: str, path: str, body: Mapping[str, Any]) -> None:
        await self._record("create", target, body)

    async def delete(self, target: str, path: str) -> None:
        await self._record("delete", target, path)

    async def patch(self, target: str, path: str, patch: Mapping[str, Any]) -> None:
        await self._record("patch", target, patch)

    def targets(self, verb: str) -> list[str]:
        return [call.target for call in self.calls if call.verb == verb]


def pod(
    name: str,
    *,
    gates: tuple[str, ...] = (GATE,),
    namespace: str = "ns",
    queue: str = "default",
    opted_in: bool = True,
    uid: str = "",
) -> objects.Pod:
    annotations = {objects.QUEUE_NAME_ANNOTATION: queue}
    if opted_in:
        annotations[GATE] = "true"
    return objects.Pod(
        namespace=namespace,
        name=name,
        group=f"{namespace}/{name}",
        scheduling_gates=gates,
        annotations=annotations,
        uid=uid or f"uid-{name}",
    )


async def wait_for(predicate: Callable[[], bool], *, deadline: float = timing.DEADLINE) -> None:
    """Poll ``predicate`` until true or fail after ``deadline`` seconds (no fixed sleeps)."""
    loop = asyncio.get_running_loop()
    limit = loop.time() + deadline
    while not predicate():
        if loop.time() > limit:
            raise AssertionError("condition not reached before the deadline")
        await asyncio.sleep(0.005)
