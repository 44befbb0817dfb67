"""kubesim's own tests: the `kubesim` fixture (a fresh server per test) and small helpers."""

from __future__ import annotations

import pathlib

from kubesim import harness

kubesim = harness.kubesim

DATA = pathlib.Path(__file__).parent / "data"
