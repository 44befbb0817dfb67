"""volcano-scheduler.conf files into ``configs.SchedulerConfiguration``."""

from __future__ import annotations

import pathlib
import textwrap
from types import MappingProxyType

import pytest
import yaml

from queuetree.api import schedconf
from queuetree.core import configs

EXAMPLES = pathlib.Path(__file__).parents[2] / "examples" / "config"


def plugin(
    name: str, arguments: dict[str, object] | None = None, **flags: bool
) -> configs.PluginOption:
    return configs.PluginOption(
        name=name,
        flags=MappingProxyType(dict(sorted(flags.items()))),
        arguments=MappingProxyType(arguments or {}),
    )


def parse(text: str) -> schedconf.ParsedConfiguration:
    return schedconf.parse_configuration(textwrap.dedent(text), source="s.conf")


def test_the_default_configuration_is_the_example_file_and_enables_hierarchy() -> None:
    assert (EXAMPLES / "default.conf").read_text() == schedconf.DEFAULT_CONFIGURATION
    assert schedconf.parse_default() == schedconf.ParsedConfiguration(
        configuration=configs.SchedulerConfiguration(
            actions=("enqueue", "allocate", "backfill", "reclaim"),
            tiers=(
                configs.Tier(plugins=(plugin("priority"), plugin("gang"), plugin("conformance"))),
                configs.Tier(
                    plugins=(
                        plugin("predicates"),
                        plugin("capacity", {"ancestorReclaimLevel": 0}, enableHierarchy=True),
                        plugin("nodeorder"),
                    )
                ),
            ),
        ),
        warnings=(),
    )


def test_the_seed_example_runs_with_warnings_for_the_plugins_queuetree_lacks() -> None:
    parsed = schedconf.parse_configuration(
        (EXAMPLES / "seed-example.conf").read_text(), source="seed-example.conf"
    )
    assert parsed.configuration == configs.SchedulerConfiguration(
        actions=("enqueue", "allocate", "backfill", "reclaim"),
        tiers=(
            configs.Tier(
                plugins=(
                    plugin("priority"),
                    plugin("gang", enablePreemptable=False),
                    plugin("conformance"),
                )
            ),
            configs.Tier(
                plugins=(
                    plugin("predicates"),
                    plugin("capacity", {"ancestorReclaimLevel": 1}, enableHierarchy=True),
                    plugin("nodeorder"),
                )
            ),
        ),
    )
    assert parsed.warnings == (
        "seed-example.conf: tiers[1].plugins[0]: plugin 'drf' is not implemented by queuetree, "
        "ignored",
        "seed-example.conf: tiers[1].plugins[4]: plugin 'binpack' is not implemented by "
        "queuetree, ignored",
    )


def test_a_configmap_holding_the_file_is_read_like_the_file() -> None:
    inner = "actions: enqueue\ntiers:\n- plugins:\n  - name: capacity\n"
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-scheduler-configmap"},
        "data": {"volcano-scheduler.conf": inner},
    }
    assert parse(yaml.safe_dump(configmap)).configuration == parse(inner).configuration


FLAGS = {
    "flags are kept in their canonical spelling": (
        """\
        actions: "enqueue, allocate"
        tiers:
        - plugins:
          - name: capacity
            enableHierarchy: true
            enableReclaimable: false
            enabledOverused: false
        """,
        plugin("capacity", enableHierarchy=True, enableReclaimable=False, enabledOverused=False),
    ),
    "the regular spelling of an irregular flag is an alias": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableAllocatable: false
            enableVictim: true
        """,
        plugin("capacity", enabledAllocatable=False, enabledVictim=True),
    ),
    "both spellings agreeing is fine": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableOverused: false
            enabledOverused: false
        """,
        plugin("capacity", enabledOverused=False),
    ),
    "a flag with no value is unset, as a nil pointer in Volcano": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableHierarchy:
        """,
        plugin("capacity"),
    ),
    "arguments are kept as written": (
        """\
        actions: reclaim
        tiers:
        - plugins:
          - name: capacity
            arguments: {ancestorReclaimLevel: 2, other: [1, 2]}
        """,
        plugin("capacity", {"ancestorReclaimLevel": 2, "other": [1, 2]}),
    ),
}


@pytest.mark.parametrize(("text", "expected"), FLAGS.values(), ids=FLAGS.keys())
def test_plugin_flags_and_arguments_are_read(text: str, expected: configs.PluginOption) -> None:
    parsed = parse(text)
    assert parsed.configuration.tiers == (configs.Tier(plugins=(expected,)),)
    assert parsed.warnings == ()


def test_a_flag_left_out_is_enabled_except_hierarchy() -> None:
    option = parse(
        "actions: allocate\ntiers:\n- plugins:\n  - name: capacity\n"
    ).configuration.plugin("capacity")
    assert option is not None
    assert {flag: option.enabled(flag) for flag in ("enableJobOrder", "enableHierarchy")} == {
        "enableJobOrder": True,
        "enableHierarchy": False,
    }


WARNINGS = {
    "an unknown plugin is dropped": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: drf
          - name: gang
        """,
        (configs.Tier(plugins=(plugin("gang"),)),),
        ["s.conf: tiers[0].plugins[0]: plugin 'drf' is not implemented by queuetree, ignored"],
    ),
    "a misspelt flag is named with the closest known spelling": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableHierachy: true
        """,
        (configs.Tier(plugins=(plugin("capacity"),)),),
        [
            "s.conf: tiers[0].plugins[0].enableHierachy: unknown option, ignored "
            "(did you mean enableHierarchy?)"
        ],
    ),
    "a Volcano flag queuetree does not use": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: gang
            enableTargetJob: false
        """,
        (configs.Tier(plugins=(plugin("gang"),)),),
        ["s.conf: tiers[0].plugins[0].enableTargetJob: not used by queuetree, ignored"],
    ),
    "action configurations are not used": (
        """\
        actions: enqueue
        tiers: []
        configurations:
        - name: enqueue
          arguments: {overcommit-factor: 1.2}
        """,
        (),
        ["s.conf: configurations: not used by queuetree, ignored"],
    ),
}


@pytest.mark.parametrize(("text", "tiers", "warnings"), WARNINGS.values(), ids=WARNINGS.keys())
def test_what_queuetree_does_not_use_is_ignored_with_a_warning(
    text: str, tiers: tuple[configs.Tier, ...], warnings: list[str]
) -> None:
    parsed = parse(text)
    assert (parsed.configuration.tiers, list(parsed.warnings)) == (tiers, warnings)


ERRORS = {
    "proportion with capacity": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: proportion
        - plugins:
          - name: capacity
        """,
        [
            "s.conf: tiers: proportion and capacity cannot be enabled together: both manage "
            "queue shares; remove proportion (queuetree implements capacity)"
        ],
    ),
    "an unknown action": (
        "actions: enqueue, shuffle, alocate\n",
        [
            "s.conf: actions: unknown action 'shuffle' (known: enqueue, allocate, backfill, "
            'reclaim, preempt) (got "enqueue, shuffle, alocate")',
            "s.conf: actions: unknown action 'alocate' (known: enqueue, allocate, backfill, "
            'reclaim, preempt) (did you mean allocate?) (got "enqueue, shuffle, alocate")',
        ],
    ),
    "no actions": (
        "tiers: []\n",
        ['s.conf: actions: is required, such as "enqueue, allocate, backfill" (got null)'],
    ),
    "wrong types everywhere": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableHierarchy: "true"
            arguments: [ancestorReclaimLevel]
          - enablePredicate: true
        - plugins: {name: gang}
        """,
        [
            's.conf: tiers[0].plugins[0].enableHierarchy: must be true or false (got "true")',
            "s.conf: tiers[0].plugins[0].arguments: must be an object of named arguments "
            '(got ["ancestorReclaimLevel"])',
            "s.conf: tiers[0].plugins[1].name: is required (got null)",
            's.conf: tiers[1].plugins: must be a list of plugins (got {"name": "gang"})',
        ],
    ),
    "two spellings of one flag that disagree": (
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enabledVictim: true
            enableVictim: false
        """,
        [
            "s.conf: tiers[0].plugins[0].enableVictim: contradicts enabledVictim (the same flag "
            "in another spelling) (got false)"
        ],
    ),
    "a list instead of an object": (
        "- actions: allocate\n",
        [
            "s.conf: the configuration must be an object with actions and tiers "
            '(got [{"actions": "allocate"}])'
        ],
    ),
    "a ConfigMap without the configuration": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {other.conf: x}\n",
        [
            's.conf: data["volcano-scheduler.conf"]: a ConfigMap must hold the configuration '
            "as a string (got null)"
        ],
    ),
    "YAML that does not parse": (
        "actions: [allocate\n",
        ["s.conf: invalid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>'"],
    ),
}


@pytest.mark.parametrize(("text", "expected"), ERRORS.values(), ids=ERRORS.keys())
def test_a_configuration_queuetree_cannot_use_is_refused_with_every_problem(
    text: str, expected: list[str]
) -> None:
    with pytest.raises(schedconf.ConfigurationError) as caught:
        parse(text)
    assert [str(problem) for problem in caught.value.problems] == expected
