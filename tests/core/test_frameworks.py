"""Tier dispatch (spec §3.11): how the votes of several plugins in several tiers combine."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from queuetree.core import configs, frameworks, plugins, sessions
from tests import builders as b


class Voter(frameworks.Plugin):
    """A plugin that answers every vote from a script: ``answer`` per hook."""

    def __init__(self, name: str, answer: object, *flags_off: str) -> None:
        flags = dict.fromkeys(flags_off, False)
        super().__init__(configs.PluginOption(name=name, flags=flags))
        self.name = name
        self.answer = answer

    def reclaimable(
        self, reclaimer: frameworks.Task, reclaimees: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        if self.answer is None:
            return [], frameworks.ABSTAIN
        assert isinstance(self.answer, list)
        return [t for t in reclaimees if t.key in self.answer], frameworks.PERMIT

    def job_pipelined(self, job: frameworks.Job) -> int:
        assert isinstance(self.answer, int)
        return self.answer

    def job_enqueueable(self, job: frameworks.Job) -> int:
        assert isinstance(self.answer, int)
        return self.answer

    def job_starving(self, job: frameworks.Job) -> bool:
        return bool(self.answer)


def _session(tiers: list[list[frameworks.Plugin]]) -> frameworks.Session:
    snapshot = b.snapshot(
        b.queue("q"),
        *(b.pod("ns", name).requests(cpu="1") for name in ("t1", "t2", "t3")),
    )
    session = sessions.open_session(
        snapshot,
        config=configs.SchedulerConfiguration(),
        feature_gates=b.GATES_ON,
    )
    session.register(tiers)
    return session


class EvictableCase(NamedTuple):
    tiers: Any
    victims: Any


EVICTABLE = {
    "one tier intersects its plugins' victims": EvictableCase(
        tiers=[[Voter("a", ["ns/t1", "ns/t2"]), Voter("b", ["ns/t2", "ns/t3"])]],
        victims=["ns/t2"],
    ),
    "an empty answer hands over to the next tier": EvictableCase(
        tiers=[[Voter("a", []), Voter("b", ["ns/t1"])], [Voter("c", ["ns/t3"])]],
        victims=["ns/t3"],
    ),
    "an abstaining plugin is skipped": EvictableCase(
        tiers=[[Voter("a", None), Voter("b", ["ns/t1"])]],
        victims=["ns/t1"],
    ),
    "an empty intersection lets the next plugin start afresh (Go's nil slice)": EvictableCase(
        tiers=[[Voter("a", ["ns/t1"]), Voter("b", ["ns/t2"]), Voter("c", ["ns/t3"])]],
        victims=["ns/t3"],
    ),
    "a plugin whose flag is off is not asked": EvictableCase(
        tiers=[[Voter("a", ["ns/t1"], "enableReclaimable"), Voter("b", ["ns/t2"])]],
        victims=["ns/t2"],
    ),
    "no tier answers: no victims": EvictableCase(
        tiers=[[Voter("a", None)], [Voter("b", [])]], victims=[]
    ),
}


@pytest.mark.parametrize(("tiers", "victims"), EVICTABLE.values(), ids=EVICTABLE.keys())
def test_reclaimable_votes_intersect_within_a_tier_and_the_first_answering_tier_decides(
    tiers: list[list[frameworks.Plugin]], victims: list[str]
) -> None:
    session = _session(tiers)
    tasks = [session.tasks[key] for key in ("ns/t1", "ns/t2", "ns/t3")]
    assert [t.key for t in session.reclaimable(tasks[0], tasks)] == victims


class VotesCase(NamedTuple):
    tiers: Any
    expected: Any


VOTES = {
    "a reject after abstaining tiers fails": VotesCase(
        tiers=[[Voter("a", 0)], [Voter("b", -1)]], expected=False
    ),
    "a tier with a permit wins before a later reject": VotesCase(
        tiers=[[Voter("a", 1), Voter("b", 0)], [Voter("c", -1)]],
        expected=True,
    ),
    "a reject in the same tier as a permit fails": VotesCase(
        tiers=[[Voter("a", 1), Voter("b", -1)]], expected=False
    ),
    "only abstentions: permitted": VotesCase(tiers=[[Voter("a", 0)]], expected=True),
}


@pytest.mark.parametrize(("tiers", "expected"), VOTES.values(), ids=VOTES.keys())
def test_pipelined_and_enqueueable_votes_follow_the_tiers(
    tiers: list[list[frameworks.Plugin]], expected: bool
) -> None:
    session = _session(tiers)
    job = session.tasks["ns/t1"].job
    assert (session.job_pipelined(job), session.job_enqueueable(job)) == (expected, expected)


class StarvingCase(NamedTuple):
    tiers: Any
    expected: Any


STARVING = {
    "no plugin: not starving": StarvingCase(tiers=[[]], expected=False),
    "the first tier with a plugin decides": StarvingCase(
        tiers=[[], [Voter("a", True)], [Voter("b", False)]], expected=True
    ),
    "all plugins of that tier must agree": StarvingCase(
        tiers=[[Voter("a", True), Voter("b", False)]], expected=False
    ),
}


@pytest.mark.parametrize(("tiers", "expected"), STARVING.values(), ids=STARVING.keys())
def test_job_starving_is_decided_by_the_first_tier_that_has_a_plugin(
    tiers: list[list[frameworks.Plugin]], expected: bool
) -> None:
    session = _session(tiers)
    assert session.job_starving(session.tasks["ns/t1"].job) is expected


def test_every_hook_has_a_flag_entry() -> None:
    assert set(frameworks.HOOK_FLAGS) == set(frameworks.Hook)


def test_every_hook_names_a_method_of_the_plugin_base() -> None:
    for hook in frameworks.Hook:
        assert callable(getattr(frameworks.Plugin, hook.value)), hook


def test_a_plugins_hooks_are_the_methods_it_overrides() -> None:
    assert Voter.hooks == {
        frameworks.Hook.RECLAIMABLE,
        frameworks.Hook.JOB_PIPELINED,
        frameworks.Hook.JOB_STARVING,
        frameworks.Hook.JOB_ENQUEUEABLE,
    }
    assert plugins.PredicatesPlugin.hooks == {frameworks.Hook.PREDICATE}
    assert frameworks.Plugin.hooks == frozenset()


def test_the_known_plugins_and_actions_are_their_tables() -> None:
    assert sessions.KNOWN_PLUGINS == (
        "priority",
        "gang",
        "conformance",
        "predicates",
        "capacity",
        "nodeorder",
    )
    assert sessions.KNOWN_ACTIONS == ("enqueue", "allocate", "backfill", "reclaim", "preempt")
    assert all(plugins.PLUGIN_TYPES[name].name == name for name in sessions.KNOWN_PLUGINS)
