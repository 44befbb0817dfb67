"""The resources kubesim serves: built-in kinds and the kinds CustomResourceDefinitions add.

A `ResourceDef` describes one resource at one served version (what discovery lists and what a URL
resolves to). Objects are stored once per `GroupResource` (group, plural) whatever version a client
uses: served versions of a CRD differ only in `apiVersion` (conversion strategy `None`).

Neighbours: `store` keeps the objects by `GroupResource`; `server` resolves URLs here;
`crds` turns a CRD manifest into `ResourceDef`s; `tables` reads `printer_columns`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

GroupResource = tuple[str, str]  # (group, plural); the storage identity of a resource

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclasses.dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One `additionalPrinterColumns` entry of a CRD version."""

    name: str
    type: str  # string | integer | number | boolean | date
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceDef:
    """One resource at one version, as discovery and URLs see it."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()  # "status", "eviction", "binding", "resize"
    builtin: bool = True  # built-ins take strategic merge patches; custom resources do not
    tracks_generation: bool = False  # metadata.generation is set and bumped on spec changes
    printer_columns: tuple[PrinterColumn, ...] | None = None  # None: the kind's default table
    schema: Any = None  # openAPIV3Schema of a CRD version; None: no pruning or validation
    preserve_unknown_fields: bool = False

    @property
    def gr(self) -> GroupResource:
        return (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _core(
    plural: str,
    kind: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    group: str = "",
    version: str = "v1",
    generation: bool = False,
    categories: tuple[str, ...] = (),
) -> ResourceDef:
    return ResourceDef(
        group=group,
        version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        categories=categories,
        subresources=frozenset(sub),
        tracks_generation=generation,
    )


BUILTINS: tuple[ResourceDef, ...] = (
    _core("namespaces", "Namespace", namespaced=False, short=("ns",), sub=("status",)),
    _core(
        "pods",
        "Pod",
        short=("po",),
        sub=("status", "eviction", "binding", "resize"),
        categories=("all",),
    ),
    _core("nodes", "Node", namespaced=False, short=("no",), sub=("status",)),
    _core("events", "Event", short=("ev",)),
    _core("configmaps", "ConfigMap", short=("cm",)),
    _core("secrets", "Secret"),
    _core("services", "Service", short=("svc",), sub=("status",), categories=("all",)),
    _core("serviceaccounts", "ServiceAccount", short=("sa",), sub=("token",)),
    _core("endpoints", "Endpoints", short=("ep",)),
    _core("leases", "Lease", group="coordination.k8s.io"),
    _core(
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        group="policy",
        short=("pdb",),
        sub=("status",),
        generation=True,
    ),
    _core(
        "priorityclasses",
        "PriorityClass",
        group="scheduling.k8s.io",
        namespaced=False,
        short=("pc",),
    ),
    _core(
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        group="admissionregistration.k8s.io",
        namespaced=False,
        generation=True,
    ),
    _core(
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        group="admissionregistration.k8s.io",
        namespaced=False,
        generation=True,
    ),
    _core(
        "customresourcedefinitions",
        "CustomResourceDefinition",
        group="apiextensions.k8s.io",
        namespaced=False,
        short=("crd", "crds"),
        sub=("status",),
        generation=True,
    ),
    _core(
        "deployments",
        "Deployment",
        group="apps",
        short=("deploy",),
        sub=("status",),
        generation=True,
        categories=("all",),
    ),
    # Stored only, as Deployments (no controller runs them): a test writes their pods.
    _core(
        "replicasets",
        "ReplicaSet",
        group="apps",
        short=("rs",),
        sub=("status",),
        generation=True,
        categories=("all",),
    ),
    _core(
        "statefulsets",
        "StatefulSet",
        group="apps",
        short=("sts",),
        sub=("status",),
        generation=True,
        categories=("all",),
    ),
    _core(
        "jobs",
        "Job",
        group="batch",
        sub=("status",),
        generation=True,
        categories=("all",),
    ),
    _core("clusterroles", "ClusterRole", group="rbac.authorization.k8s.io", namespaced=False),
    _core(
        "clusterrolebindings",
        "ClusterRoleBinding",
        group="rbac.authorization.k8s.io",
        namespaced=False,
    ),
    _core("roles", "Role", group="rbac.authorization.k8s.io"),
    _core("rolebindings", "RoleBinding", group="rbac.authorization.k8s.io"),
    # Stored only, as RBAC is: kubesim has no network to police.
    _core(
        "networkpolicies",
        "NetworkPolicy",
        group="networking.k8s.io",
        short=("netpol",),
        generation=True,
    ),
)

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' version order: GA before beta before alpha, higher numbers first, then others.

    Smaller tuples sort first, so `sorted(versions, key=version_priority)[0]` is the preferred one.
    """
    match = _VERSION_RE.match(version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), "")


class Registry:
    """Every served resource, indexed by (group, version, plural) and by kind.

    Built-ins are fixed; CRD resources are replaced whenever their CRD changes. The registry is
    only touched on the server's event loop.
    """

    def __init__(self) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceDef] = {}
        self._crd_owned: dict[str, list[tuple[str, str, str]]] = {}  # CRD name -> its keys
        for rdef in BUILTINS:
            self._by_gvr[(rdef.group, rdef.version, rdef.plural)] = rdef

    def resolve(self, group: str, version: str, *, plural: str) -> ResourceDef | None:
        return self._by_gvr.get((group, version, plural))

    def any_version(self, group: str, plural: str) -> ResourceDef | None:
        """The preferred served version of a resource, whatever version a caller knows."""
        candidates = [d for (g, _, p), d in self._by_gvr.items() if g == group and p == plural]
        if not candidates:
            return None
        return min(candidates, key=lambda d: version_priority(d.version))

    def iter_defs(self) -> Iterator[ResourceDef]:
        yield from self._by_gvr.values()

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions, preferred first (the core group is "")."""
        result: dict[str, set[str]] = {}
        for group, version, _ in self._by_gvr:
            result.setdefault(group, set()).add(version)
        return {g: sorted(vs, key=version_priority) for g, vs in sorted(result.items())}

    def resources_of(self, group: str, version: str) -> list[ResourceDef]:
        return [d for (g, v, _), d in self._by_gvr.items() if g == group and v == version]

    def register_crd(self, crd_name: str, defs: list[ResourceDef]) -> None:
        """Replace what a CRD serves with `defs` (empty: it serves nothing any more)."""
        for key in self._crd_owned.pop(crd_name, []):
            self._by_gvr.pop(key, None)
        keys = []
        for rdef in defs:
            key = (rdef.group, rdef.version, rdef.plural)
            self._by_gvr[key] = rdef
            keys.append(key)
        self._crd_owned[crd_name] = keys

    def unregister_crd(self, crd_name: str) -> None:
        self.register_crd(crd_name, [])
        self._crd_owned.pop(crd_name, None)
