"""Hypothesis profiles: `make test` draws no random seeds; `make fuzz` explores.

- ``ci`` (the default, for `make test` and CI): derandomized, so every run tries the same
  examples (a seed derived from each test's name) and a red run is red for the change under
  test, never for a new draw; no deadline (a loaded 2-core machine makes any per-example
  deadline flaky); no example database (a clean clone has none, and a run must not depend on
  an earlier one); on failure, the falsifying example and a ``@reproduce_failure`` blob.
- ``fuzz`` (`make fuzz`): random seeds, :data:`FUZZ_SCALE` times each test's budget of
  examples, and the example database in ``.hypothesis/``, so a failure found once is tried
  first on the next run. A failure found there becomes an explicit ``@example`` (or a case of
  a table) of the test, so that `make test` checks it from then on.

The profile is chosen by ``QUEUETREE_HYPOTHESIS_PROFILE`` (``ci`` when unset); tests/conftest.py
loads it before any test module is imported, so :func:`examples` sees it at decoration time.
"""

from __future__ import annotations

import os
from typing import Final

from hypothesis import HealthCheck, settings

PROFILE_VARIABLE: Final = "QUEUETREE_HYPOTHESIS_PROFILE"
SCALE_VARIABLE: Final = "QUEUETREE_FUZZ_SCALE"
CI: Final = "ci"
FUZZ: Final = "fuzz"

FUZZ_SCALE: Final = int(os.environ.get(SCALE_VARIABLE, "20"))
"""How many times its `make test` budget of examples each property test runs under `make fuzz`."""

# Generated manifests are large by design (odd values at any depth): generation being slower
# than the test is expected, not a defect of the strategy.
_SLOW_DATA: Final = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    CI,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=_SLOW_DATA,
)
settings.register_profile(
    FUZZ,
    derandomize=False,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_DATA,
)


def load() -> str:
    """Load the profile the environment names (``ci`` when it names none); its name."""
    name = os.environ.get(PROFILE_VARIABLE) or CI
    if name not in (CI, FUZZ):
        raise ValueError(f"{PROFILE_VARIABLE}={name!r}: expected {CI!r} or {FUZZ!r}")
    settings.load_profile(name)
    return name


def examples(count: int) -> int:
    """A property test's budget: ``count`` examples under ``ci``, :data:`FUZZ_SCALE` times as
    many under ``fuzz``."""
    return count * FUZZ_SCALE if settings.get_current_profile_name() == FUZZ else count
