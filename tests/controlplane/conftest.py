"""Fixtures for the control plane's tests: the cached binaries, or a skip that says why.

Tests that start processes need ``make controlplane`` to have run (``make test`` runs it
first). Without Go on the machine they are skipped with that reason; where
``QUEUETREE_REQUIRE_REAL=1`` is set (CI), a missing control plane fails them instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

import pytest

from controlplane import building


def _unavailable(reason: str) -> None:
    if os.environ.get("QUEUETREE_REQUIRE_REAL"):
        pytest.fail(f"QUEUETREE_REQUIRE_REAL is set, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def binaries() -> Mapping[str, building.Built]:
    """Every component from the cache (nothing is built here)."""
    if shutil.which("go") is None:
        _unavailable("go is not on PATH: the control plane cannot be built (make controlplane)")
    found = building.find_all()
    if found is None:
        _unavailable("the control plane is not built: run make controlplane")
    assert found is not None
    return found


@pytest.fixture(scope="session")
def go() -> str:
    """The Go version, for tests that run the go command."""
    if shutil.which("go") is None:
        _unavailable("go is not on PATH")
    return building.go_version()
