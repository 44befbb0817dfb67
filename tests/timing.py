"""How long a test polls for a state it expects, one number for every poll helper.

A deadline only bounds how long a failing test takes to say so; a passing test returns as soon
as the state holds. So it is set for the slowest machine the suite runs on: two cores, both
lanes of ``make test`` running (hack/lanes.sh), a Go build or a control plane beside them.
Polls that wait for much longer work (an autoscaler's scale-up, a burst) name their own.
"""

from typing import Final

DEADLINE: Final = 60.0
"""Seconds a poll waits before it fails."""
