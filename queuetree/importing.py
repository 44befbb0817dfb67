"""kubernetes-asyncio's generated client, one class at a time.

``kubernetes_asyncio/__init__.py`` imports its ``client`` package, whose ``__init__`` imports
every generated API and model class (about 1,260 modules, 38 MiB of resident memory per
process), and Python runs a package's ``__init__`` before any of its modules: reading a
kubeconfig (``kubernetes_asyncio.config``), the leader election, ``ApiClient`` and ``kopf``
itself (which looks for the client's ``V1ObjectMeta``) all paid for every class of every API
group. queuetree's processes use a dozen of them.

:func:`defer_generated_client` registers ``kubernetes_asyncio`` and its packages ``client``,
``client.api`` and ``client.models`` as modules made from their own specs but not run: their
modules import from the installed files as before, and a name that the package's
``__init__`` imports (``client.CoreV1Api``, ``client.models.V1Lease``, which ``ApiClient``
looks up by name when it deserialises an answer) is imported from the module the ``__init__``
names for it when it is first read (:pep:`562`). Every class is the library's own, from the
library's own files: only when each is loaded changes.

``queuetree/__init__.py`` calls it, so any process that imports queuetree before
kubernetes-asyncio (the ``queuetree`` command, the tests, the benchmarks) gets it; a process
that imported kubernetes-asyncio first keeps the package as it loaded.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import re
import sys
import types
from collections.abc import Callable
from typing import Final

DEFERRED: Final = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
)
"""The packages whose ``__init__`` is not run, parents first."""

_FROM_IMPORT: Final = re.compile(r"^from (kubernetes_asyncio(?:\.\w+)+) import (\w+)[ \t]*$", re.M)
"""The generated ``__init__``'s lines: ``from kubernetes_asyncio.client.api.core_v1_api import
CoreV1Api``."""
_IMPORT_AS: Final = re.compile(r"^import (kubernetes_asyncio(?:\.\w+)+) as (\w+)[ \t]*$", re.M)
"""The top package's: ``import kubernetes_asyncio.client as client``."""
_CONSTANT: Final = re.compile(r"^(__\w+__) = \"([^\"]*)\"[ \t]*$", re.M)
"""Its string constants: ``__version__ = "36.1.0"``."""


UNTIL_USED: Final = ("urllib3",)
"""Modules imported by name (``import urllib3``) that run when one of their attributes is first
read: kubernetes-asyncio's configuration imports urllib3 (2.0 MiB resident) for basic
authentication's header only, which queuetree's processes never use."""


def defer_until_used(names: tuple[str, ...] = UNTIL_USED) -> None:
    """Register each of ``names`` as its module made from its spec, run when an attribute it
    does not have yet is first read (:pep:`562`), unless it is not installed or already
    imported. (``importlib.util.LazyLoader`` would run it at the importer's own ``import``
    statement, which reads the module's ``__spec__``.)"""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        module.__dict__["__getattr__"] = _run_at_first_use(module, spec)
        sys.modules[name] = module


def _run_at_first_use(
    module: types.ModuleType, spec: importlib.machinery.ModuleSpec
) -> Callable[[str], object]:
    def __getattr__(attribute: str) -> object:
        # Once: the module's own code then defines its names (and may define a __getattr__).
        if module.__dict__.get("__getattr__") is __getattr__:
            del module.__dict__["__getattr__"]
            assert spec.loader is not None
            spec.loader.exec_module(module)
        try:
            return module.__dict__[attribute]
        except KeyError:
            own = module.__dict__.get("__getattr__")
            if own is None:
                raise AttributeError(
                    f"module {module.__name__!r} has no attribute {attribute!r}"
                ) from None
            return own(attribute)

    return __getattr__


def defer_generated_client() -> None:
    """Register :data:`DEFERRED`, unless kubernetes-asyncio is not installed or already
    imported (then nothing changes)."""
    if DEFERRED[0] in sys.modules or importlib.util.find_spec(DEFERRED[0]) is None:
        return
    for name in DEFERRED:
        module = _unrun_package(name)
        parent, _, child = name.rpartition(".")
        sys.modules[name] = module
        if parent:
            # What the import system does for a package it ran: the parent names its child.
            setattr(sys.modules[parent], child, module)


def _unrun_package(name: str) -> types.ModuleType:
    """Package ``name`` made from its spec, with what its ``__init__`` defines read from its
    text and imported on first use."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name}: not a package of files", name=name)
    module = importlib.util.module_from_spec(spec)
    with open(spec.origin, encoding="utf-8") as init:
        text = init.read()
    sources = {attribute: source for source, attribute in _FROM_IMPORT.findall(text)}
    module.__dict__.update(_CONSTANT.findall(text))
    # The package's public names, as its own __all__ lists them; the top package's are its
    # subpackages, which __getattr__ imports by name.
    submodules = [attribute for _, attribute in _IMPORT_AS.findall(text)]
    module.__dict__["__all__"] = [*sources, *submodules]
    module.__dict__["__getattr__"] = _first_use(module, sources)
    return module


def _first_use(module: types.ModuleType, sources: dict[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``module``: a name its ``__init__`` imports, else its submodule of
    that name; kept on the module once found, so each is looked for once."""
    package = module.__name__

    def __getattr__(attribute: str) -> object:
        if attribute in sources:
            found = getattr(importlib.import_module(sources[attribute]), attribute)
        elif attribute.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {attribute!r}")
        else:
            submodule = f"{package}.{attribute}"
            try:
                found = importlib.import_module(submodule)
            except ModuleNotFoundError as error:
                if error.name != submodule:
                    raise  # a module that exists failed to import: not a missing attribute
                raise AttributeError(f"module {package!r} has no attribute {attribute!r}") from None
        setattr(module, attribute, found)
        return found

    return __getattr__
