"""volcano-scheduler.conf files into ``configs.SchedulerConfiguration``."""

from __future__ import annotations

import pathlib
import textwrap
from types import MappingProxyType
from typing import Any, NamedTuple

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


class FlagsCase(NamedTuple):
    text: Any
    expected: Any


FLAGS = {
    "flags are kept in their canonical spelling": FlagsCase(
        text="""\
        actions: "enqueue, allocate"
        tiers:
        - plugins:
          - name: capacity
            enableHierarchy: true
            enableReclaimable: false
            enabledOverused: false
        """,
        expected=plugin(
            "capacity", enableHierarchy=True, enableReclaimable=False, enabledOverused=False
        ),
    ),
    "the regular spelling of an irregular flag is an alias": FlagsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableAllocatable: false
            enableVictim: true
        """,
        expected=plugin("capacity", enabledAllocatable=False, enabledVictim=True),
    ),
    "both spellings agreeing is fine": FlagsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableOverused: false
            enabledOverused: false
        """,
        expected=plugin("capacity", enabledOverused=False),
    ),
    "a flag with no value is unset, as a nil pointer in Volcano": FlagsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableHierarchy:
        """,
        expected=plugin("capacity"),
    ),
    "arguments are kept as written": FlagsCase(
        text="""\
        actions: reclaim
        tiers:
        - plugins:
          - name: capacity
            arguments: {ancestorReclaimLevel: 2, other: [1, 2]}
        """,
        expected=plugin("capacity", {"ancestorReclaimLevel": 2, "other": [1, 2]}),
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


class WarningsCase(NamedTuple):
    text: Any
    tiers: Any
    warnings: Any


WARNINGS = {
    "an unknown plugin is dropped": WarningsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: drf
          - name: gang
        """,
        tiers=(configs.Tier(plugins=(plugin("gang"),)),),
        warnings=[
            "s.conf: tiers[0].plugins[0]: plugin 'drf' is not implemented by queuetree, ignored"
        ],
    ),
    "a misspelt flag is named with the closest known spelling": WarningsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableHierachy: true
        """,
        tiers=(configs.Tier(plugins=(plugin("capacity"),)),),
        warnings=[
            "s.conf: tiers[0].plugins[0].enableHierachy: unknown option, ignored "
            "(did you mean enableHierarchy?)"
        ],
    ),
    "a Volcano flag queuetree does not use": WarningsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: gang
            enableTargetJob: false
        """,
        tiers=(configs.Tier(plugins=(plugin("gang"),)),),
        warnings=["s.conf: tiers[0].plugins[0].enableTargetJob: not used by queuetree, ignored"],
    ),
    "action configurations are not used": WarningsCase(
        text="""\
        actions: enqueue
        tiers: []
        configurations:
        - name: enqueue
          arguments: {overcommit-factor: 1.2}
        """,
        tiers=(),
        warnings=["s.conf: configurations: not used by queuetree, ignored"],
    ),
}


@pytest.mark.parametrize(("text", "tiers", "warnings"), WARNINGS.values(), ids=WARNINGS.keys())
def test_what_queuetree_does_not_use_is_ignored_with_a_warning(
    text: str, tiers: tuple[configs.Tier, ...], warnings: list[str]
) -> None:
    parsed = parse(text)
    assert (parsed.configuration.tiers, list(parsed.warnings)) == (tiers, warnings)


class ErrorsCase(NamedTuple):
    text: Any
    expected: Any


ERRORS = {
    "proportion with capacity": ErrorsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: proportion
        - plugins:
          - name: capacity
        """,
        expected=[
            "s.conf: tiers: proportion and capacity cannot be enabled together: both manage "
            "queue shares; remove proportion (queuetree implements capacity)"
        ],
    ),
    "an unknown action": ErrorsCase(
        text="actions: enqueue, shuffle, alocate\n",
        expected=[
            "s.conf: actions: unknown action 'shuffle' (known: enqueue, allocate, backfill, "
            'reclaim, preempt) (got "enqueue, shuffle, alocate")',
            "s.conf: actions: unknown action 'alocate' (known: enqueue, allocate, backfill, "
            'reclaim, preempt) (did you mean allocate?) (got "enqueue, shuffle, alocate")',
        ],
    ),
    "no actions": ErrorsCase(
        text="tiers: []\n",
        expected=['s.conf: actions: is required, such as "enqueue, allocate, backfill" (got null)'],
    ),
    "wrong types everywhere": ErrorsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enableHierarchy: "true"
            arguments: [ancestorReclaimLevel]
          - enablePredicate: true
        - plugins: {name: gang}
        """,
        expected=[
            's.conf: tiers[0].plugins[0].enableHierarchy: must be true or false (got "true")',
            "s.conf: tiers[0].plugins[0].arguments: must be an object of named arguments "
            '(got ["ancestorReclaimLevel"])',
            "s.conf: tiers[0].plugins[1].name: is required (got null)",
            's.conf: tiers[1].plugins: must be a list of plugins (got {"name": "gang"})',
        ],
    ),
    "two spellings of one flag that disagree": ErrorsCase(
        text="""\
        actions: allocate
        tiers:
        - plugins:
          - name: capacity
            enabledVictim: true
            enableVictim: false
        """,
        expected=[
            "s.conf: tiers[0].plugins[0].enableVictim: contradicts enabledVictim (the same flag "
            "in another spelling) (got false)"
        ],
    ),
    "a list instead of an object": ErrorsCase(
        text="- actions: allocate\n",
        expected=[
            "s.conf: the configuration must be an object with actions and tiers "
            '(got [{"actions": "allocate"}])'
        ],
    ),
    "a ConfigMap without the configuration": ErrorsCase(
        text="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {other.conf: x}\n",
        expected=[
            's.conf: data["volcano-scheduler.conf"]: a ConfigMap must hold the configuration '
            "as a string (got null)"
        ],
    ),
    "device class mappings that cannot be used": ErrorsCase(
        text="""\
        actions: allocate
        deviceClassMappings:
        - resourceName: gpu
          deviceClassNames: [a.example.com]
        - resourceName: nvidia.com/gpu
          deviceClassNames: []
        - resourceName: example.com/nic
          deviceClassNames: [b.example.com]
        - resourceName: nvidia.com/gpu
          deviceClassNames: [b.example.com, c.example.com]
        - just-a-string
        """,
        expected=[
            "s.conf: deviceClassMappings[0].resourceName: must be an extended resource name "
            "with a domain, such as nvidia.com/gpu (queues count other names as nothing) "
            '(got "gpu")',
            "s.conf: deviceClassMappings[1].deviceClassNames: must be a non-empty list of "
            "DeviceClass names (got [])",
            "s.conf: deviceClassMappings[3].deviceClassNames[0]: is already mapped to "
            'example.com/nic: a class is charged as one resource (got "b.example.com")',
            "s.conf: deviceClassMappings[4]: must be an object with resourceName and "
            'deviceClassNames (got "just-a-string")',
        ],
    ),
    "YAML that does not parse": ErrorsCase(
        text="actions: [allocate\n",
        expected=[
            "s.conf: invalid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>'"
        ],
    ),
}


@pytest.mark.parametrize(("text", "expected"), ERRORS.values(), ids=ERRORS.keys())
def test_a_configuration_queuetree_cannot_use_is_refused_with_every_problem(
    text: str, expected: list[str]
) -> None:
    with pytest.raises(schedconf.ConfigurationError) as caught:
        parse(text)
    assert [str(problem) for problem in caught.value.problems] == expected


def test_device_class_mappings_map_each_class_to_its_resource() -> None:
    parsed = parse(
        """\
        actions: allocate
        deviceClassMappings:
        - resourceName: nvidia.com/gpu
          deviceClassNames: [gpu.example.com, big-gpu.example.com]
        - resourceName: example.com/nic
          deviceClassNames: [nic.example.com]
        """
    )
    assert (dict(parsed.configuration.device_classes), parsed.warnings) == (
        {
            "big-gpu.example.com": "nvidia.com/gpu",
            "gpu.example.com": "nvidia.com/gpu",
            "nic.example.com": "example.com/nic",
        },
        (),
    )
