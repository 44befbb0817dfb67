"""Objects, resourceVersions and the watch event log: the only mutable cluster state.

- One global resourceVersion counter; every write takes the next number, stringified.
- Objects are stored per `GroupResource` as `Stored(obj, raw)`: `obj` is never mutated after it
  is stored (writers build a new dict), `raw` is its JSON, encoded once per write and reused by
  GET responses and watch events alike.
- Each resource has an append-only event log. Watchers read it from their own position and wait
  on a future that the next write to that resource resolves. Events are appended in RV order, each
  with exactly the object and RV the write returned.
- Compaction drops events; a watch from a resourceVersion older than the resource's compaction
  point gets 410 Expired. Logs compact themselves when they grow past `max_events`.

All methods run on the server's event loop; a write is one synchronous call, so the loop itself is
the write lock: nothing interleaves between reading the RV and appending the event.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

from kubesim import registry

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


def encode(obj: Any) -> bytes:
    """The one JSON encoding of the server: compact, UTF-8."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclasses.dataclass(frozen=True, slots=True)
class Stored:
    obj: dict  # never mutated once stored
    raw: bytes  # encode(obj)
    rv: int


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict
    raw: bytes  # the object's JSON, as the write returned it
    old: dict | None  # the previous object (for selector transitions), None for ADDED


class ResourceLog:
    """The event log of one resource, with a compaction point and a wake-up future."""

    __slots__ = ("_rvs", "compacted_rv", "events", "offset", "waiter")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._rvs: list[int] = []
        self.offset = 0  # absolute index of events[0]; grows as the log is compacted
        self.compacted_rv = 0  # watches from an RV below this one are 410 Expired
        self.waiter: asyncio.Future[None] | None = None

    def append(self, event: Event) -> None:
        self.events.append(event)
        self._rvs.append(event.rv)
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wait(self) -> asyncio.Future[None]:
        if self.waiter is None:
            self.waiter = asyncio.get_running_loop().create_future()
        return self.waiter

    def wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def position_after(self, rv: int) -> int:
        """The absolute index of the first event with an RV above `rv`."""
        return self.offset + bisect.bisect_right(self._rvs, rv)

    def events_from(self, position: int) -> list[Event]:
        """Events at absolute index `position` and later; the caller checked compaction first."""
        return self.events[max(0, position - self.offset) :]

    def end(self) -> int:
        return self.offset + len(self.events)

    def compact(self, *, upto_rv: int | None = None, keep: int | None = None) -> None:
        """Drop every event up to `upto_rv`, or all but the newest `keep` events.

        Afterwards a watch may resume from any RV at or above `compacted_rv` without a gap.
        """
        if keep is not None:
            drop = max(0, len(self.events) - keep)
            floor = self.events[drop - 1].rv if drop else self.compacted_rv
        else:
            assert upto_rv is not None
            drop = bisect.bisect_right(self._rvs, upto_rv)
            floor = upto_rv
        del self.events[:drop]
        del self._rvs[:drop]
        self.offset += drop
        self.compacted_rv = max(self.compacted_rv, floor)


class Store:
    """The objects of every resource, the global RV and the event logs."""

    def __init__(self, *, max_events: int = 50_000) -> None:
        self.rv = 1
        self.max_events = max_events
        self._objects: dict[registry.GroupResource, dict[Key, Stored]] = {}
        self._logs: dict[registry.GroupResource, ResourceLog] = {}
        self.watch_epoch = 0  # bumped by drop_watches(); open streams close when it changes
        # owner uid -> the objects whose ownerReferences name it (for garbage collection)
        self._dependents: dict[str, set[tuple[registry.GroupResource, Key]]] = {}
        self._uids: set[str] = set()  # the uids of every stored object

    # Reads

    def get(self, gr: registry.GroupResource, key: Key) -> Stored | None:
        return self._objects.get(gr, {}).get(key)

    def list(self, gr: registry.GroupResource, namespace: str | None = None) -> list[Stored]:
        """Objects of a resource sorted by (namespace, name); `None` covers every namespace."""
        objects = self._objects.get(gr, {})
        keys = (
            sorted(objects)
            if namespace is None
            else sorted(k for k in objects if k[0] == namespace)
        )
        return [objects[k] for k in keys]

    def iter_all(self, gr: registry.GroupResource) -> Iterator[Stored]:
        yield from self._objects.get(gr, {}).values()

    def count(self, gr: registry.GroupResource, namespace: str | None = None) -> int:
        objects = self._objects.get(gr, {})
        if namespace is None:
            return len(objects)
        return sum(1 for k in objects if k[0] == namespace)

    def exists(self, uid: str) -> bool:
        return uid in self._uids

    def dependents(self, uid: str) -> builtins.list[tuple[registry.GroupResource, Key]]:
        """The objects that name `uid` in their ownerReferences, sorted."""
        return sorted(self._dependents.get(uid, ()))

    def _index(
        self, gr: registry.GroupResource, key: Key, *, old: dict | None, new: dict | None
    ) -> None:
        old_meta = old["metadata"] if old is not None else {}
        new_meta = new["metadata"] if new is not None else {}
        if old_meta.get("uid") != new_meta.get("uid"):
            self._uids.discard(old_meta.get("uid", ""))
            if new_meta.get("uid"):
                self._uids.add(new_meta["uid"])
        old_refs = old_meta.get("ownerReferences")
        new_refs = new_meta.get("ownerReferences")
        if not old_refs and not new_refs:
            return
        for ref in old_refs or ():
            self._dependents.get(ref.get("uid", ""), set()).discard((gr, key))
        for ref in new_refs or ():
            self._dependents.setdefault(ref.get("uid", ""), set()).add((gr, key))

    def log(self, gr: registry.GroupResource) -> ResourceLog:
        log = self._logs.get(gr)
        if log is None:
            log = self._logs[gr] = ResourceLog()
        return log

    # Writes: each takes the next RV, stores, appends the event, wakes the watchers.

    def _next_rv(self, obj: dict) -> int:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return self.rv

    def create(self, gr: registry.GroupResource, key: Key, *, obj: dict) -> Stored:
        rv = self._next_rv(obj)
        stored = Stored(obj, encode(obj), rv)
        self._objects.setdefault(gr, {})[key] = stored
        self._index(gr, key, old=None, new=obj)
        self._emit(gr, Event(rv, ADDED, obj, stored.raw, None))
        return stored

    def update(self, gr: registry.GroupResource, key: Key, *, obj: dict) -> Stored:
        old = self._objects[gr][key]
        rv = self._next_rv(obj)
        stored = Stored(obj, encode(obj), rv)
        self._objects[gr][key] = stored
        self._index(gr, key, old=old.obj, new=obj)
        self._emit(gr, Event(rv, MODIFIED, obj, stored.raw, old.obj))
        return stored

    def delete(self, gr: registry.GroupResource, key: Key, *, obj: dict) -> Stored:
        """Remove an object; `obj` is its final state, which the DELETED event carries."""
        old = self._objects[gr].pop(key)
        self._index(gr, key, old=old.obj, new=None)
        rv = self._next_rv(obj)
        stored = Stored(obj, encode(obj), rv)
        self._emit(gr, Event(rv, DELETED, obj, stored.raw, old.obj))
        return stored

    def _emit(self, gr: registry.GroupResource, event: Event) -> None:
        log = self.log(gr)
        log.append(event)
        if len(log.events) > self.max_events:
            log.compact(keep=self.max_events // 2)

    # Test hooks

    def compact(self) -> int:
        """Drop every event so far; watches from any earlier RV get 410. Returns the RV."""
        for log in self._logs.values():
            log.compact(upto_rv=self.rv)
        return self.rv

    def drop_watches(self) -> None:
        """Close every open watch stream (clients see the connection end and re-watch)."""
        self.watch_epoch += 1
        for log in self._logs.values():
            log.wake()

    def wake_all(self) -> None:
        for log in self._logs.values():
            log.wake()
