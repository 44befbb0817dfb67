"""Scenario files: what the sandbox applies, waits for, deletes and expects (docs/sandbox.md).

A scenario is YAML::

    name: demo
    description: a queue tree and a burst of pods
    nodes: [../nodes.yaml]          # Node manifest files, relative to this file
    nodeFlags: ["n1:cpu=4,memory=8Gi"]  # more nodes, kubesim's flag syntax
    settle: 3                       # seconds without change that count as settled
    steps:
      - apply: ../queues/hierarchy.yaml   # a file, one manifest, or a list of manifests
      - apply: {kind: Queue, ...}
        denied: "exceeds the maximum allowed depth"   # the apply must fail saying this
      - wait: {pod: p1, namespace: team-a, stage: running}   # poll until it holds
        timeout: 60
      - delete: pod/p2
        namespace: team-a
      - patch: pod/p3
        namespace: team-a
        type: json
        body: [{op: replace, path: /spec/schedulingGates, value: []}]
      - patch: queue/team-a           # close a queue: write its status.state
        subresource: status
        type: merge
        body: {status: {state: Closed}}
      - expect: {queue: team-a, allocated: {cpu: "2"}}   # after settling, holds right now
    expect:                          # checked once the cluster has settled after the steps
      - {pods: {app: burst}, counts: {gated: 2, running: 6}}

Conditions (``wait``, ``expect``):

- ``pod: NAME`` (``namespace``, default ``default``) with any of ``exists`` (bool), ``stage``
  (gated, admitted, running, succeeded, failed, evicted), ``gates`` (the exact list),
  ``phase``, ``explained`` (a text the operator's admission-reason annotation contains);
- ``pods: {LABEL: VALUE, ...}`` (``namespace`` optional) with ``counts: {STAGE: N, ...}`` and
  ``explained`` (every gated pod among them is explained with these words);
- ``queue: NAME`` with any of ``exists``, ``state``, and ``allocated``, ``reserved``,
  ``deserved``, ``capability``, ``realCapability`` (quantities compared by value).

``wait`` polls until the condition holds (``timeout``, default 60 s). ``expect`` first waits
until nothing has changed for ``settle`` seconds, then checks once: it can say that something
did *not* happen (a pod is still gated), which polling cannot.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from queuetree.api import bodies
from queuetree.core import objects
from queuetree.sandbox import kubectl, observing

REASON_ANNOTATION = objects.ADMISSION_REASON_ANNOTATION
"""The operator's explanation annotation (``queuetree.operator.explaining``)."""
STEP_KINDS = ("apply", "delete", "patch", "wait", "expect")
POD_KEYS = {"pod", "namespace", "exists", "stage", "gates", "phase", "explained"}
PODS_KEYS = {"pods", "namespace", "counts", "explained"}
QUEUE_FIGURES = ("allocated", "reserved", "deserved", "capability", "realCapability")
QUEUE_KEYS = {"queue", "exists", "state", *QUEUE_FIGURES}
DEFAULT_WAIT = 60.0
DEFAULT_SETTLE = 3.0
SETTLE_LIMIT = 120.0


class ScenarioError(ValueError):
    """The scenario file is not understood; the message names the file and the step."""


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    kind: str
    """One of :data:`STEP_KINDS`."""
    value: Any
    """apply: manifests (a list of dicts); delete/patch: ``resource/name``; wait/expect: a
    condition."""
    namespace: str = ""
    timeout: float = DEFAULT_WAIT
    denied: str = ""
    """apply/delete/patch: the command must fail and print this."""
    warning: str = ""
    """apply: kubectl must print ``Warning: <this>...``."""
    patch_type: str = "strategic"
    body: Any = None
    subresource: str = ""
    """patch: ``status`` to patch the status subresource (how a queue is closed or opened)."""

    def title(self) -> str:
        shown = self.value if self.kind != "apply" else _names(self.value)
        return f"{self.kind} {shown}"


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    path: pathlib.Path
    description: str
    nodes_files: tuple[pathlib.Path, ...]
    node_flags: tuple[str, ...]
    settle: float
    steps: tuple[Step, ...]
    expect: tuple[Mapping[str, Any], ...]


def load(path: pathlib.Path) -> Scenario:
    """Read and check a scenario file; :class:`ScenarioError` says what is wrong and where."""
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"scenario {path}: cannot be read: {exc}") from exc
    if not isinstance(document, dict):
        raise ScenarioError(f"scenario {path}: expected a mapping with steps, got {document!r}")
    base = path.resolve().parent
    unknown = set(document) - {
        "name",
        "description",
        "nodes",
        "nodeFlags",
        "settle",
        "steps",
        "expect",
    }
    if unknown:
        raise ScenarioError(f"scenario {path}: unknown keys {sorted(unknown)}")
    steps = tuple(
        _step(raw, base=base, where=f"scenario {path}: step {index}")
        for index, raw in enumerate(document.get("steps") or [], start=1)
    )
    expect = tuple(
        _condition(raw, where=f"scenario {path}: expect {index}")
        for index, raw in enumerate(document.get("expect") or [], start=1)
    )
    nodes = tuple((base / str(p)).resolve() for p in document.get("nodes") or [])
    return Scenario(
        name=str(document.get("name") or path.stem),
        path=path,
        description=str(document.get("description") or ""),
        nodes_files=nodes,
        node_flags=tuple(str(f) for f in document.get("nodeFlags") or []),
        settle=float(document.get("settle", DEFAULT_SETTLE)),
        steps=steps,
        expect=expect,
    )


def _step(raw: Any, *, base: pathlib.Path, where: str) -> Step:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {raw!r}")
    kinds = [k for k in STEP_KINDS if k in raw]
    if len(kinds) != 1:
        raise ScenarioError(f"{where}: needs exactly one of {', '.join(STEP_KINDS)}, got {raw!r}")
    (kind,) = kinds
    allowed = {kind, "name", "namespace", "timeout", "denied", "warning", "type", "body"}
    allowed.add("subresource")
    unknown = set(raw) - allowed
    if unknown:
        raise ScenarioError(f"{where}: unknown keys {sorted(unknown)}")
    value = raw[kind]
    if kind == "apply":
        value = _manifests(value, base=base, where=where)
    elif kind in ("delete", "patch"):
        if not isinstance(value, str) or "/" not in value:
            raise ScenarioError(f"{where}: {kind} takes RESOURCE/NAME, got {value!r}")
    else:
        value = _condition(value, where=where)
    if kind == "patch" and raw.get("body") is None:
        raise ScenarioError(f"{where}: patch needs a body")
    return Step(
        kind=kind,
        value=value,
        namespace=str(raw.get("namespace", "")),
        timeout=float(raw.get("timeout", DEFAULT_WAIT)),
        denied=str(raw.get("denied", "")),
        warning=str(raw.get("warning", "")),
        patch_type=str(raw.get("type", "strategic")),
        body=raw.get("body"),
        subresource=str(raw.get("subresource", "")),
    )


def _manifests(value: Any, *, base: pathlib.Path, where: str) -> list[dict[str, Any]]:
    if isinstance(value, str):
        file = base / value
        try:
            documents = list(yaml.safe_load_all(file.read_text()))
        except (OSError, yaml.YAMLError) as exc:
            raise ScenarioError(f"{where}: {file} cannot be read: {exc}") from exc
    elif isinstance(value, dict):
        documents = [value]
    elif isinstance(value, list):
        documents = value
    else:
        raise ScenarioError(f"{where}: apply takes a file, a manifest or a list, got {value!r}")
    manifests: list[dict[str, Any]] = []
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, dict) or "kind" not in document:
            raise ScenarioError(f"{where}: not a manifest: {document!r}")
        if document["kind"] == "List":
            manifests.extend(document.get("items") or [])
        else:
            manifests.append(document)
    return manifests


def _condition(raw: Any, *, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: a condition is a mapping, got {raw!r}")
    for subject, keys in (("pod", POD_KEYS), ("pods", PODS_KEYS), ("queue", QUEUE_KEYS)):
        if subject in raw:
            unknown = set(raw) - keys
            if unknown:
                raise ScenarioError(f"{where}: unknown keys for a {subject} {sorted(unknown)}")
            stage = raw.get("stage")
            if stage is not None and stage not in observing.STAGES:
                raise ScenarioError(f"{where}: stage {stage!r} is not one of {observing.STAGES}")
            return dict(raw)
    raise ScenarioError(f"{where}: a condition names a pod, pods or a queue, got {raw!r}")


def _names(manifests: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(
        f"{m.get('kind', '?')}/{bodies.metadata_of(m).get('name', '?')}" for m in manifests
    )


# --------------------------------------------------------------------------- checking


def check(condition: Mapping[str, Any], observation: observing.Observation) -> str:
    """Why ``condition`` does not hold in ``observation``; empty when it holds."""
    if "pod" in condition:
        return _check_pod(condition, observation)
    if "pods" in condition:
        return _check_pods(condition, observation)
    return _check_queue(condition, observation)


def _check_pod(condition: Mapping[str, Any], observation: observing.Observation) -> str:
    key = f"{condition.get('namespace', 'default')}/{condition['pod']}"
    pod = observation.pods.get(key)
    if pod is None:
        if condition.get("stage") == "evicted" and key in observation.evicted:
            return ""
        return "" if condition.get("exists") is False else f"pod {key} does not exist"
    if condition.get("exists") is False:
        return f"pod {key} still exists"
    problems = []
    stage = observing.stage_of(pod)
    if key in observation.evicted and bodies.metadata_of(pod).get("deletionTimestamp"):
        stage = "evicted"
    if "stage" in condition and stage != condition["stage"]:
        problems.append(f"stage is {stage}, expected {condition['stage']}")
    if "gates" in condition and observing.gates_of(pod) != list(condition["gates"]):
        problems.append(f"gates are {observing.gates_of(pod)}, expected {condition['gates']}")
    phase = bodies.status_of(pod).get("phase")
    if "phase" in condition and phase != condition["phase"]:
        problems.append(f"phase is {phase}, expected {condition['phase']}")
    if "explained" in condition:
        reason = (bodies.metadata_of(pod).get("annotations") or {}).get(REASON_ANNOTATION, "")
        if str(condition["explained"]) not in reason:
            problems.append(
                f"explanation is {reason!r}, expected it to say {condition['explained']!r}"
            )
    return f"pod {key}: {'; '.join(problems)}" if problems else ""


def _check_pods(condition: Mapping[str, Any], observation: observing.Observation) -> str:
    labels = dict(condition["pods"] or {})
    namespace = condition.get("namespace")
    selected = {
        key: pod
        for key, pod in observation.pods.items()
        if (namespace is None or key.startswith(f"{namespace}/"))
        and all(
            (bodies.metadata_of(pod).get("labels") or {}).get(k) == v for k, v in labels.items()
        )
    }
    counts = observing.stage_counts(observation, pods=selected)
    expected = dict(condition.get("counts") or {})
    actual = {stage: counts.get(stage, 0) for stage in expected}
    if actual != expected:
        return f"pods {labels}: counts {actual}, expected {expected} (all: {counts})"
    if "explained" in condition:
        words = str(condition["explained"])
        unexplained = sorted(
            key
            for key, pod in selected.items()
            if observing.stage_of(pod) == "gated"
            and words
            not in (bodies.metadata_of(pod).get("annotations") or {}).get(REASON_ANNOTATION, "")
        )
        if unexplained:
            return f"pods {labels}: gated without an explanation saying {words!r}: {unexplained}"
    return ""


def _check_queue(condition: Mapping[str, Any], observation: observing.Observation) -> str:
    name = str(condition["queue"])
    queue = observation.queues.get(name)
    if queue is None:
        return "" if condition.get("exists") is False else f"queue {name} does not exist"
    if condition.get("exists") is False:
        return f"queue {name} still exists"
    status = bodies.status_of(queue)
    problems = []
    if "state" in condition and status.get("state") != condition["state"]:
        problems.append(f"state is {status.get('state')}, expected {condition['state']}")
    for figure in QUEUE_FIGURES:
        if figure in condition and not observing.same_quantities(
            status.get(figure), condition[figure]
        ):
            problems.append(f"{figure} is {status.get(figure)}, expected {condition[figure]}")
    return f"queue {name}: {'; '.join(problems)}" if problems else ""


# --------------------------------------------------------------------------- running


@dataclasses.dataclass(slots=True)
class Runner:
    """Runs scenarios against one cluster through kubectl."""

    client: kubectl.Kubectl
    settle: float = DEFAULT_SETTLE
    log: Callable[[str], None] = lambda _text: None
    settle_limit: float = SETTLE_LIMIT

    def run(self, scenario: Scenario) -> list[str]:
        """Steps, then settling, then the final expectations: every failure, as text."""
        failures = self.run_steps(scenario)
        if failures:
            return failures
        if not scenario.expect:
            return []
        observation = self.settled()
        return [
            f"expect {index}: {problem}"
            for index, condition in enumerate(scenario.expect, start=1)
            if (problem := check(condition, observation))
        ]

    def run_steps(self, scenario: Scenario) -> list[str]:
        """Run the steps in order; stop at the first failure and return it (or nothing)."""
        for index, step in enumerate(scenario.steps, start=1):
            self.log(f"step {index}: {step.title()}")
            problem = self.run_step(step)
            if problem:
                return [f"step {index} ({step.title()}): {problem}"]
        return []

    def run_step(self, step: Step) -> str:
        """Run one step; why it failed, or empty."""
        if step.kind == "apply":
            return _outcome(self.client.apply(step.value), step)
        if step.kind == "delete":
            args = ["delete", step.value, "--timeout=60s"]
            return _outcome(self.client.run(*args, *_namespace(step)), step)
        if step.kind == "patch":
            args = ["patch", step.value, f"--type={step.patch_type}", "-p", _json(step.body)]
            if step.subresource:
                args.append(f"--subresource={step.subresource}")
            return _outcome(self.client.run(*args, *_namespace(step)), step)
        if step.kind == "wait":
            return self.wait(step.value, timeout=step.timeout)
        return check(step.value, self.settled())

    def wait(self, condition: Mapping[str, Any], *, timeout: float) -> str:
        """Poll until ``condition`` holds; the last reason it did not, on timeout."""
        deadline = time.monotonic() + timeout
        problem = ""
        while True:
            try:
                problem = check(condition, observing.observe(self.client))
            except kubectl.KubectlError as exc:
                problem = str(exc)
            if not problem:
                return ""
            if time.monotonic() >= deadline:
                return f"not within {timeout:g}s: {problem}"
            time.sleep(0.2)

    def settled(self) -> observing.Observation:
        """The first observation after which nothing changed for ``settle`` seconds (or the
        latest one once ``settle_limit`` seconds have passed: a cluster that never settles
        still gets its expectations checked, and they say what differs)."""
        limit = time.monotonic() + self.settle_limit
        observation = observing.observe(self.client)
        since, print_ = time.monotonic(), observing.fingerprint(observation)
        while time.monotonic() - since < self.settle and time.monotonic() < limit:
            time.sleep(0.2)
            observation = observing.observe(self.client)
            current = observing.fingerprint(observation)
            if current != print_:
                since, print_ = time.monotonic(), current
        return observation


def _namespace(step: Step) -> list[str]:
    return ["-n", step.namespace] if step.namespace else []


def _json(value: Any) -> str:
    return json.dumps(value)


def _outcome(result: kubectl.Result, step: Step) -> str:
    if step.denied:
        if result.ok:
            return f"expected a denial saying {step.denied!r}, but it succeeded: {result.stdout}"
        if step.denied not in result.stderr:
            return f"denied, but without {step.denied!r}: {result.stderr.strip()}"
        return ""
    if not result.ok:
        return result.stderr.strip() or f"kubectl exited {result.returncode}"
    if step.warning and f"Warning: {step.warning}" not in result.stderr:
        return f"expected a warning {step.warning!r}, got {result.stderr.strip()!r}"
    return ""
