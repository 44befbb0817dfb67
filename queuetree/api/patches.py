"""JSON patches (RFC 6902) of the objects queuetree changes: the webhook's mutations, the
operator's gate removal and the finalizer it holds on busy queues.

Only ``queuetree.api`` knows wire keys (STYLE rule 7), and a patch names them in its paths
(``/spec/schedulingGates``, ``/metadata/annotations/...``). The webhooks and the operator decide
*what* changes (a default, our gate, an annotation); the operations are built here. Each builder
returns fresh operations, in the order the API server applies them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from queuetree.api import admission, bodies
from queuetree.core import objects

Operation = admission.RawPatchOperation


def pointer(key: str) -> str:
    """A map key as one JSON-pointer segment (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def annotation_path(key: str) -> str:
    """The JSON pointer of annotation ``key``."""
    return "/metadata/annotations/" + pointer(key)


def add_annotations(body: object, added: Mapping[str, str]) -> list[Operation]:
    """Set the annotations ``added`` on ``body``: one ``add`` per key ("add" replaces a member
    that exists, RFC 6902), or one ``add`` of the whole map when ``body`` has none."""
    if not isinstance(bodies.metadata_of(body).get("annotations"), Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(added)}]
    return [
        {"op": "add", "path": annotation_path(key), "value": value} for key, value in added.items()
    ]


def add_scheduling_gate(body: object, gate: str) -> list[Operation]:
    """Append ``gate`` to ``spec.schedulingGates`` (creating the list when absent)."""
    if bodies.spec_of(body).get("schedulingGates") is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": gate}]}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": gate}}]


def has_spec(body: object) -> bool:
    """Whether ``body`` has a ``spec`` object (a patch path below it needs one)."""
    return isinstance(body, Mapping) and isinstance(body.get("spec"), Mapping)


def add_spec(body: object) -> list[Operation]:
    """An empty ``spec`` when ``body`` has none, so later ``add`` operations below it apply."""
    return [] if has_spec(body) else [{"op": "add", "path": "/spec", "value": {}}]


def add_spec_field(name: str, value: Any) -> Operation:
    """Set ``spec.<name>`` (its ``spec`` must exist: :func:`add_spec`)."""
    return {"op": "add", "path": f"/spec/{pointer(name)}", "value": value}


def set_spec_field(body: object, name: str, value: Any) -> list[Operation]:
    """Set ``spec.<name>``, with ``spec`` itself when ``body`` has none."""
    if has_spec(body):
        return [add_spec_field(name, value)]
    return [{"op": "add", "path": "/spec", "value": {name: value}}]


def gate_removal(
    pod: objects.Pod,
    *,
    gate: str,
    record: Mapping[str, str],
    forget: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Remove ``spec.schedulingGates`` from ``pod`` when ``gate`` is all it holds.

    In order: ``test`` the uid (a pod recreated under the same name is another pod), ``test``
    that the gates are exactly ``[gate]`` (another controller's gate added since keeps the pod
    held), ``remove`` the gates, ``add`` the annotations ``record``, and ``remove`` each
    annotation of ``forget`` the pod carries. Whether the gate may go is the caller's rule.
    """
    patch: list[dict[str, Any]] = []
    if pod.uid:
        patch.append({"op": "test", "path": "/metadata/uid", "value": pod.uid})
    patch.append({"op": "test", "path": "/spec/schedulingGates", "value": [{"name": gate}]})
    patch.append({"op": "remove", "path": "/spec/schedulingGates"})
    if pod.annotations:
        # "add" sets the member whether or not it is there (RFC 6902).
        patch.extend(
            {"op": "add", "path": annotation_path(key), "value": value}
            for key, value in record.items()
        )
    else:
        patch.append({"op": "add", "path": "/metadata/annotations", "value": dict(record)})
    patch.extend(
        {"op": "remove", "path": annotation_path(key)} for key in forget if key in pod.annotations
    )
    return patch


def add_finalizer(
    finalizers: Iterable[str], *, finalizer: str, resource_version: str
) -> list[dict[str, Any]]:
    """Add ``finalizer`` to an object that carries ``finalizers`` (as read).

    ``test`` first that the list is what was read, so a finalizer another controller added
    since is never dropped; an object without any is tested on its ``resourceVersion``
    instead (a missing member cannot be tested). The API server refuses a new finalizer on an
    object being deleted (422), and answers 404 for one that is gone: either way the finalizer
    is not there, and the caller must not count on it.
    """
    held = list(finalizers)
    if held:
        return [
            {"op": "test", "path": "/metadata/finalizers", "value": held},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
    ]


def remove_finalizer(finalizers: Iterable[str], *, finalizer: str) -> list[dict[str, Any]]:
    """Remove ``finalizer`` from an object that carries ``finalizers`` (as read, ``finalizer``
    among them), after a ``test`` of the list: nobody else's finalizer is removed, whatever
    changed since."""
    held = list(finalizers)
    return [
        {"op": "test", "path": "/metadata/finalizers", "value": held},
        {"op": "remove", "path": f"/metadata/finalizers/{held.index(finalizer)}"},
    ]
