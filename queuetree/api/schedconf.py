"""Scheduler configuration files (Volcano's ``volcano-scheduler.conf``) into core records.

The format, as Volcano reads it::

    actions: "enqueue, allocate, backfill, reclaim"     # comma list, run in this order
    tiers:                                             # plugins, tier by tier
    - plugins:
      - name: priority
      - name: capacity
        enableHierarchy: true                          # flags, spelled exactly as Volcano does
        arguments: {ancestorReclaimLevel: 1}

A whole ConfigMap (``kind: ConfigMap`` with ``data["volcano-scheduler.conf"]``, as Volcano is
deployed) is accepted too. Flags follow :mod:`queuetree.core.configs`: a flag left out is on
(except ``enableHierarchy``), the regular spelling of the three irregular flags
(``enableAllocatable`` for ``enabledAllocatable``, ...) is accepted as an alias.

What is an error and what a warning. Errors (:class:`ConfigurationError`, every problem listed):
YAML that does not parse, wrong types, no or unknown actions, a plugin without a name, a flag that
is not a boolean, both spellings of one flag with different values, ``proportion`` together with
``capacity`` (they fight over queues; Volcano's design forbids it). Warnings (the configuration
is used): plugins queuetree does not implement (``drf``, ``binpack``, ``proportion`` alone...) are
dropped, options Volcano knows but queuetree does not use, options nobody knows (with the closest
known spelling, since Volcano silently ignores a misspelt flag, which then reads as enabled), and
the ``configurations``/``metrics`` sections.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import yaml

from queuetree.core import configs, problems, resources, sessions

CONFIGMAP_KEY: Final = "volcano-scheduler.conf"
"""The data key of Volcano's scheduler ConfigMap."""

VOLCANO_ONLY_FLAGS: Final = frozenset(
    {"EnabledClusterOrder", "enableTargetJob", "enableReservedNodes", "enableHyperNodeOrder"}
)
"""Plugin options Volcano has and queuetree does not use (accepted with a warning)."""

IGNORED_SECTIONS: Final = ("configurations", "metrics")
SECTIONS: Final = ("actions", "tiers", "deviceClassMappings")
"""The top-level sections queuetree reads."""
"""Top-level sections of Volcano's file that queuetree reads past (with a warning)."""

DEFAULT_CONFIGURATION: Final = """\
# queuetree's default scheduler configuration (the volcano-scheduler.conf format).
#
# Hierarchical queues with the capacity plugin: enqueue admits pod groups whose queue (and every
# ancestor) has room, allocate places pods, backfill places best-effort pods, and reclaim takes
# back what other queues borrowed beyond their deserved share.
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: capacity
    enableHierarchy: true
    arguments:
      # How far up the tree reclaim checks deserved shares: 0 (Volcano's default) only the
      # victim's leaf; 1 also its parent, so a team whose department is within its share keeps
      # what it borrowed; 2 the grandparent too, and so on.
      ancestorReclaimLevel: 0
  - name: nodeorder
"""
"""The configuration used when none is given; the same text as examples/config/default.conf."""


class ConfigurationError(problems.InputError):
    """A scheduler configuration that cannot be used; ``problems`` lists every reason."""


@dataclasses.dataclass(frozen=True, slots=True)
class ParsedConfiguration:
    configuration: configs.SchedulerConfiguration
    warnings: tuple[str, ...] = ()
    """Things ignored on the way (unknown plugins and options), for a person."""


def parse_configuration(text: str, *, source: str = "") -> ParsedConfiguration:
    """Read a ``volcano-scheduler.conf`` text (or a ConfigMap holding one).

    ``source`` names the file in problems and warnings. Raises :class:`ConfigurationError`.
    """
    reader = _ConfigReader(source)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        reason = getattr(error, "problem", None) or str(error)
        raise ConfigurationError(
            [problems.Problem(message=f"invalid YAML{where}: {reason}", origin=source)]
        ) from None
    if isinstance(document, Mapping) and document.get("kind") == "ConfigMap":
        data = document.get("data")
        inner = data.get(CONFIGMAP_KEY) if isinstance(data, Mapping) else None
        if not isinstance(inner, str):
            raise ConfigurationError(
                [
                    problems.Problem(
                        message="a ConfigMap must hold the configuration as a string",
                        origin=source,
                        path=f"data{problems.key(CONFIGMAP_KEY)}",
                        value=inner,
                    )
                ]
            )
        return parse_configuration(inner, source=f"{source} data{problems.key(CONFIGMAP_KEY)}")
    configuration = reader.read(document)
    if reader.found:
        raise ConfigurationError(reader.found)
    return ParsedConfiguration(configuration=configuration, warnings=tuple(reader.warnings))


def parse_default() -> ParsedConfiguration:
    """:data:`DEFAULT_CONFIGURATION`, parsed."""
    return parse_configuration(DEFAULT_CONFIGURATION, source="default configuration")


class _ConfigReader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.found: list[problems.Problem] = []
        self.warnings: list[str] = []
        self.dropped: set[str] = set()
        """Names of plugins read but not implemented (still checked for conflicts)."""

    def fail(self, path: str, message: str, *, value: object = problems.NO_VALUE) -> None:
        self.found.append(
            problems.Problem(message=message, origin=self.source, path=path, value=value)
        )

    def warn(self, path: str, message: str) -> None:
        where = ": ".join(part for part in (self.source, path) if part)
        self.warnings.append(f"{where}: {message}" if where else message)

    def read(self, document: object) -> configs.SchedulerConfiguration:
        if not isinstance(document, Mapping):
            self.fail(
                "", "the configuration must be an object with actions and tiers", value=document
            )
            return configs.SchedulerConfiguration()
        for name in document:
            if name in IGNORED_SECTIONS:
                self.warn(str(name), "not used by queuetree, ignored")
            elif name not in SECTIONS:
                self.warn(str(name), f"unknown section, ignored{_suggest(name, SECTIONS)}")
        actions = self.read_actions(document.get("actions"))
        raw_tiers = document.get("tiers")
        if raw_tiers is None:
            raw_tiers = []
        if not isinstance(raw_tiers, list):
            self.fail("tiers", "must be a list of tiers", value=raw_tiers)
            raw_tiers = []
        tiers = tuple(self.read_tier(index, tier) for index, tier in enumerate(raw_tiers))
        names = {option.name for tier in tiers for option in tier.plugins}
        names |= self.dropped
        if {"proportion", "capacity"} <= names:
            self.fail(
                "tiers",
                "proportion and capacity cannot be enabled together: both manage queue "
                "shares; remove proportion (queuetree implements capacity)",
            )
        return configs.SchedulerConfiguration(
            device_classes=MappingProxyType(
                self.read_device_classes(document.get("deviceClassMappings"))
            ),
            actions=actions,
            tiers=tuple(
                configs.Tier(
                    plugins=tuple(o for o in tier.plugins if o.name in sessions.KNOWN_PLUGINS)
                )
                for tier in tiers
            ),
        )

    def read_device_classes(self, raw: object) -> dict[str, str]:
        """``deviceClassMappings``: a list of ``{resourceName, deviceClassNames}``; the devices
        of those DRA classes are charged to queues as ``resourceName`` (``core.devices``)."""
        found: dict[str, str] = {}
        if raw is None:
            return found
        if not isinstance(raw, list):
            self.fail(
                "deviceClassMappings",
                "must be a list of {resourceName, deviceClassNames}",
                value=raw,
            )
            return found
        for index, item in enumerate(raw):
            path = problems.field_path("deviceClassMappings", index)
            if not isinstance(item, Mapping):
                self.fail(
                    path, "must be an object with resourceName and deviceClassNames", value=item
                )
                continue
            for option in item:
                if option not in ("resourceName", "deviceClassNames"):
                    self.warn(
                        problems.field_path(path, str(option)),
                        "unknown option, ignored"
                        f"{_suggest(option, ('resourceName', 'deviceClassNames'))}",
                    )
            name = item.get("resourceName")
            name_path = problems.field_path(path, "resourceName")
            if not isinstance(name, str) or not name:
                self.fail(name_path, "is required: the resource queues limit", value=name)
                continue
            if name in (resources.CPU, resources.MEMORY, resources.PODS) or not (
                resources.Resource.from_resource_list({name: "1"}).scalars
            ):
                self.fail(
                    name_path,
                    "must be an extended resource name with a domain, such as nvidia.com/gpu "
                    "(queues count other names as nothing)",
                    value=name,
                )
                continue
            classes = item.get("deviceClassNames")
            classes_path = problems.field_path(path, "deviceClassNames")
            if not isinstance(classes, list) or not classes:
                self.fail(
                    classes_path, "must be a non-empty list of DeviceClass names", value=classes
                )
                continue
            for position, device_class in enumerate(classes):
                class_path = problems.field_path(classes_path, position)
                if not isinstance(device_class, str) or not device_class:
                    self.fail(class_path, "must be a DeviceClass name", value=device_class)
                elif found.get(device_class, name) != name:
                    self.fail(
                        class_path,
                        f"is already mapped to {found[device_class]}: a class is charged as "
                        "one resource",
                        value=device_class,
                    )
                else:
                    found[device_class] = name
        return dict(sorted(found.items()))

    def read_actions(self, raw: object) -> tuple[str, ...]:
        if not isinstance(raw, str):
            message = "is required" if raw is None else "must be a comma-separated string"
            self.fail("actions", f'{message}, such as "enqueue, allocate, backfill"', value=raw)
            return ()
        actions = tuple(part.strip() for part in raw.split(",") if part.strip())
        if not actions:
            self.fail("actions", "must name at least one action", value=raw)
        for action in actions:
            if action not in sessions.KNOWN_ACTIONS:
                known = ", ".join(sessions.KNOWN_ACTIONS)
                self.fail(
                    "actions",
                    f"unknown action {action!r} (known: {known})"
                    f"{_suggest(action, sessions.KNOWN_ACTIONS)}",
                    value=raw,
                )
        return actions

    def read_tier(self, index: int, raw: object) -> configs.Tier:
        path = problems.field_path("tiers", index)
        if not isinstance(raw, Mapping):
            self.fail(path, "a tier must be an object with plugins", value=raw)
            return configs.Tier()
        plugins = raw.get("plugins")
        if plugins is None:
            return configs.Tier()
        if not isinstance(plugins, list):
            self.fail(
                problems.field_path(path, "plugins"), "must be a list of plugins", value=plugins
            )
            return configs.Tier()
        options = []
        for position, plugin in enumerate(plugins):
            option = self.read_plugin(problems.field_path(path, "plugins", position), plugin)
            if option is not None:
                options.append(option)
        return configs.Tier(plugins=tuple(options))

    def read_plugin(self, path: str, raw: object) -> configs.PluginOption | None:
        if not isinstance(raw, Mapping):
            self.fail(path, "a plugin must be an object with a name", value=raw)
            return None
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            self.fail(problems.field_path(path, "name"), "is required", value=name)
            return None
        if name not in sessions.KNOWN_PLUGINS:
            self.dropped.add(name)
            self.warn(
                path,
                f"plugin {name!r} is not implemented by queuetree, ignored"
                f"{_suggest(name, sessions.KNOWN_PLUGINS)}",
            )
        flags: dict[str, bool] = {}
        spelled: dict[str, str] = {}
        arguments: Mapping[str, object] = MappingProxyType({})
        for option, value in raw.items():
            option_path = problems.field_path(path, str(option))
            if option == "name":
                continue
            if option == "arguments":
                arguments = self.read_arguments(option_path, value)
                continue
            canonical = configs.FLAG_ALIASES.get(str(option), str(option))
            if canonical not in configs.KNOWN_FLAGS:
                if option in VOLCANO_ONLY_FLAGS:
                    self.warn(option_path, "not used by queuetree, ignored")
                else:
                    known = (*configs.KNOWN_FLAGS, *configs.FLAG_ALIASES, "arguments")
                    self.warn(option_path, f"unknown option, ignored{_suggest(option, known)}")
                continue
            if value is None:  # `enableX:` with no value is unset in Volcano (a nil *bool)
                continue
            if not isinstance(value, bool):
                self.fail(option_path, "must be true or false", value=value)
                continue
            if canonical in flags and flags[canonical] != value:
                self.fail(
                    option_path,
                    f"contradicts {spelled[canonical]} (the same flag in another spelling)",
                    value=value,
                )
                continue
            flags[canonical] = value
            spelled[canonical] = str(option)
        return configs.PluginOption(
            name=name, flags=MappingProxyType(dict(sorted(flags.items()))), arguments=arguments
        )

    def read_arguments(self, path: str, raw: object) -> Mapping[str, object]:
        if raw is None:
            return MappingProxyType({})
        if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
            self.fail(path, "must be an object of named arguments", value=raw)
            return MappingProxyType({})
        return MappingProxyType(dict(raw))


def _suggest(word: object, known: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(str(word), list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""
