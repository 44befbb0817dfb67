"""The existing queues as a tree: what every rule about a queue's place reads.

:class:`QueueTree` holds the queues by name and their children by effective parent, walks
ancestors (stopping at root, a missing queue or a repeat: a tree being validated may hold a
cycle), and memoizes the sums and name sets several rules of one review share.
:data:`EMPTY_TREE` is a tree with no queues (a review with nothing cached yet).

Its readers: the queue rules (``field_rules``, ``tree_rules``, ``deletion_rules``), the
webhook's warnings (``queue_warnings``) and the webhook's cluster view, which builds one per
change of the queues it watches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

from queuetree.core import objects, resources


@dataclasses.dataclass(frozen=True, slots=True)
class QueueTree:
    """The existing queues by name, and their children by effective parent.

    Root is implicit: a queue whose parent is ``root`` (or "") has a valid parent even when no
    ``root`` Queue object exists yet (the operator creates it). Build with :meth:`of`.
    """

    queues: Mapping[str, objects.Queue]
    children: Mapping[str, tuple[str, ...]]
    """Effective parent name -> child names, sorted (listing order of the reference)."""

    @classmethod
    def of(cls, queues: Iterable[objects.Queue]) -> QueueTree:
        by_name = {queue.name: queue for queue in queues}
        children: dict[str, list[str]] = {}
        for name in sorted(by_name):
            parent = by_name[name].parent_name
            if parent:
                children.setdefault(parent, []).append(name)
        return cls(
            queues=MappingProxyType(by_name),
            children=MappingProxyType({k: tuple(v) for k, v in children.items()}),
        )

    _sums: dict[str, tuple[resources.Resource, resources.Resource]] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Memo of :meth:`children_sums` (the tree never changes, so neither do they)."""
    _users: dict[str, Mapping[str, frozenset[str]]] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Memo of :meth:`scalar_users` (under the key "")."""

    def children_of(self, name: str) -> tuple[str, ...]:
        return self.children.get(name, ())

    def scalar_users(self) -> Mapping[str, frozenset[str]]:
        """Scalar resource name -> the queues whose capability, deserved or guarantee name it."""
        found = self._users.get("")
        if found is None:
            users: dict[str, set[str]] = {}
            for queue in self.queues.values():
                for name in scalar_names(queue):
                    users.setdefault(name, set()).add(queue.name)
            found = {name: frozenset(names) for name, names in users.items()}
            self._users[""] = found
        return found

    def children_sums(self, name: str) -> tuple[resources.Resource, resources.Resource]:
        """The sums of the guarantee and of the deserved of ``name``'s children."""
        found = self._sums.get(name)
        if found is None:
            children = [self.queues[c] for c in self.children_of(name) if c in self.queues]
            found = (
                resources.sum_all(c.guarantee for c in children),
                resources.sum_all(c.deserved for c in children),
            )
            self._sums[name] = found
        return found

    def exists(self, name: str) -> bool:
        return name == objects.ROOT_QUEUE or name in self.queues

    def iter_ancestors(
        self, parent: str, *, start: str, limit: int = objects.MAX_QUEUE_DEPTH
    ) -> Iterator[str]:
        """Walk up from ``parent`` (exclusive of root), stopping before a repeat or a missing queue.

        ``start`` is the name of the queue whose parent ``parent`` is: reaching it means a
        cycle, and the walk yields it once and stops. At most ``limit`` names are yielded (a
        chain that long is refused whatever lies above it, so no walk goes further).
        """
        seen = {start}
        current = parent
        for _ in range(limit):
            if not current or current == objects.ROOT_QUEUE:
                return
            yield current
            if current in seen or current not in self.queues:
                return
            seen.add(current)
            current = self.queues[current].parent_name


EMPTY_TREE = QueueTree.of(())


def scalar_names(queue: objects.Queue) -> set[str]:
    """The scalar resources (``nvidia.com/gpu``, ``pods``, ...) that ``queue``'s capability,
    deserved or guarantee names with an amount (a zero entry names nothing)."""
    names: set[str] = set()
    for vector in (queue.capability, queue.deserved, queue.guarantee):
        if vector is not None and vector.scalars:
            names.update(n for n, v in vector.scalars.items() if v >= resources.EPS)
    return names
