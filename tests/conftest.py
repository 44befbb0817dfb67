"""Shared pytest configuration: warnings are errors (pyproject.toml), tables use ids,
Hypothesis runs the profile tests/properties.py describes (derandomized unless `make fuzz`),
and the tests that start a real control plane are marked and kept on one worker.

``make unit`` runs the tests on two workers (pytest-xdist, ``--dist loadgroup``). A test that
starts the real control plane (tests/controlplane, and the ``real`` side of the ``api``
fixture in tests/kubesim, which shares one control plane per worker) is marked
``controlplane`` and put in one xdist group, so that one worker runs them all: one control
plane at a time on the machine, started once. ``-m "not controlplane"`` leaves them out.
"""

from __future__ import annotations

import pathlib

import pytest

from tests import properties

properties.load()

HERE = pathlib.Path(__file__).resolve().parent
CONTROLPLANE_TESTS = HERE / "controlplane"
CONTROLPLANE_GROUP = "controlplane"
REAL_BACKEND = "real"
"""The ``api`` fixture's parameter for the real control plane (tests/kubesim/backends.py)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "controlplane: starts the real control plane (or its processes); all such tests run "
        "on one xdist worker",
    )


def starts_a_control_plane(item: pytest.Item) -> bool:
    """Whether ``item`` starts the real control plane or its processes."""
    if pathlib.Path(str(item.fspath)).resolve().is_relative_to(CONTROLPLANE_TESTS):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("api") == REAL_BACKEND


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if starts_a_control_plane(item):
            item.add_marker(pytest.mark.controlplane)
            item.add_marker(pytest.mark.xdist_group(CONTROLPLANE_GROUP))
