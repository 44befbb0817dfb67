"""Generate the Helm chart ``charts/queuetree/`` from the kustomize manifests.

The kustomize tree under ``manifests/`` is the one definition of every object queuetree
installs; the chart is derived from what ``kubectl kustomize`` renders, so the two cannot
disagree. This script renders three overlays and turns their objects into templates:

- ``overlays/default`` is the chart with its default values;
- ``overlays/cert-manager``: what differs from the default is put under
  ``certificates.mode: cert-manager`` (objects only one of them has, and the fields that
  differ, each as an ``if``/``else`` in the template);
- ``overlays/monitoring``: its extra objects are put under ``monitoring.serviceMonitor.enabled``
  (the metrics Services and the ServiceMonitor) and ``monitoring.dashboard.enabled`` (the
  Grafana dashboard's ConfigMap).

Then the values admins change replace fields of the rendered objects (:func:`substitute`),
with the rendered value as the default in ``values.yaml``: the image, replicas, resources,
node placement, the components' flags (:data:`FLAGS`) and where the API server reaches the
webhook. ``tests/deploy/test_chart.py`` checks that ``helm template`` with the default values
(and with each of the two modes) prints exactly the objects of the matching overlay, and that
the committed chart is what this script writes.

Run ``.venv/bin/python hack/gen_chart.py`` after changing ``manifests/``, ``crds/`` or the
version in ``pyproject.toml``. ``--manifests DIR --out DIR`` renders another checkout's tree
(the upgrade test builds the chart of an older revision that way).

A new flag for the components is one row of :data:`FLAGS` (its value, schema and template
follow from it); a new object or field is written in ``manifests/`` and regenerated.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHART = "queuetree"
NAMESPACE = "queuetree-system"
COMPONENTS = {"queuetree-operator": "operator", "queuetree-webhook": "webhook"}
"""The two Deployments and the values key of each."""
CERT_MANAGER = 'eq .Values.certificates.mode "cert-manager"'
SELF_MANAGED = 'ne .Values.certificates.mode "cert-manager"'
KEEP = {"helm.sh/resource-policy": "keep"}
"""On the CRDs: ``helm uninstall`` leaves them and every Queue and PodGroup (docs/operations.md)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Flag:
    """A command-line flag admins set through a value; rendered only when the value is set."""

    value: str
    """The key in values.yaml."""
    flag: str
    components: tuple[str, ...]
    """The values keys of the components that take it (both, where they must agree)."""
    kind: str
    """``string``, ``list`` (joined with commas) or ``gates`` (a map of feature gates)."""
    description: str


FLAGS = (
    Flag(
        "defaultQueue",
        "--default-queue",
        ("operator", "webhook"),
        "string",
        "Queue of opted-in pods and PodGroups that name none (empty: the components' default, "
        "`default`). The operator and the webhook get the same value.",
    ),
    Flag(
        "schedulerNames",
        "--scheduler-name",
        ("operator", "webhook"),
        "list",
        "Schedulers that place the pods queuetree admits (empty: `default-scheduler`).",
    ),
    Flag(
        "featureGates",
        "--feature-gates",
        ("operator", "webhook"),
        "gates",
        "Feature gates of both components, e.g. {SchedulingGatesQueueAdmission: true} (the "
        "opt-in gate mode, on by default).",
    ),
)


# --- the template tree ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Expr:
    """A scalar written by a template action (``{{ ... }}``), as is."""

    text: str


@dataclasses.dataclass(frozen=True, slots=True)
class Block:
    """A value rendered by ``toYaml`` of a values path (a map or a list)."""

    path: str


@dataclasses.dataclass(frozen=True, slots=True)
class Cond:
    """An entry present as ``then`` when ``test`` holds, else as ``otherwise`` (MISSING: absent)."""

    test: str
    then: Any
    otherwise: Any


@dataclasses.dataclass(frozen=True, slots=True)
class With:
    """An entry present only when the values path is set (``{{- with }}``), as a Block."""

    path: str


@dataclasses.dataclass(frozen=True, slots=True)
class Extras:
    """Template lines appended to a list (flags rendered from values); ``{pad}`` in a line is
    the list's indentation."""

    lines: tuple[str, ...]


MISSING = Expr("<missing>")


def _scalar(value: Any) -> str:
    if isinstance(value, Expr):
        return value.text
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return _escape(text)


def _escape(text: str) -> str:
    """Template actions in the rendered text itself (the dashboard's ``{{queue}}``) are printed
    by an action of their own."""
    return text.replace("{{", '{{ "{{" }}')


def _is_block(value: Any) -> bool:
    return isinstance(value, dict | list) and bool(value)


def _emit_entry(key: str | None, value: Any, indent: int, first_prefix: str) -> Iterator[str]:
    """Lines for ``key: value`` (or a list item when key is None) at ``indent``; the first line
    starts with ``first_prefix`` (``- `` for the first entry of a list item)."""
    pad = " " * indent
    head = pad + first_prefix + (f"{_scalar(key)}:" if key is not None else "")
    if isinstance(value, Block):
        yield head
        yield f"{pad}  {{{{- toYaml {value.path} | nindent {indent + 2} }}}}"
    elif isinstance(value, str) and "\n" in value and not value[:1].isspace():
        body = value.rstrip("\n")
        trailing = len(value) - len(body)
        chomp = {0: "|-", 1: "|"}.get(trailing, "|+")
        yield head + (" " if key is not None else "") + chomp
        for line in (body + "\n" * max(trailing - 1, 0)).split("\n"):
            yield f"{pad}  {_escape(line)}" if line else ""
    elif _is_block(value):
        if key is None:
            yield from _emit(value, indent + len(first_prefix), first_prefix=pad + first_prefix)
        else:
            yield head
            child = indent + (2 if isinstance(value, dict) else 0)
            yield from _emit(value, child)
    else:
        yield head + (" " if key is not None else "") + _scalar(value)


def _emit(node: Any, indent: int, first_prefix: str | None = None) -> Iterator[str]:
    """Block-style YAML lines of a map or a list at ``indent``; ``first_prefix`` replaces the
    padding of the first line (a map that is a list item)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(node, dict):
        items = list(node.items())
        if first_prefix is not None:
            # A list item's first line carries the "- ": lead with an unconditional entry.
            items.sort(key=lambda kv: isinstance(kv[1], Cond | With))
        for position, (key, value) in enumerate(items):
            prefix = ""
            lead = first_prefix is not None and position == 0
            if isinstance(value, Cond):
                lines.append(f"{{{{- if {value.test} }}}}")
                if value.then is not MISSING:
                    lines.extend(_emit_entry(key, value.then, indent, prefix))
                if value.otherwise is not MISSING:
                    lines.append("{{- else }}")
                    lines.extend(_emit_entry(key, value.otherwise, indent, prefix))
                lines.append("{{- end }}")
            elif isinstance(value, With):
                lines.append(f"{{{{- with {value.path} }}}}")
                lines.extend(_emit_entry(key, Block("."), indent, prefix))
                lines.append("{{- end }}")
            else:
                entry = list(_emit_entry(key, value, indent, prefix))
                if lead:
                    assert first_prefix is not None
                    entry[0] = first_prefix + entry[0][len(pad) :]
                lines.extend(entry)
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, Extras):
                lines.extend(line.replace("{pad}", pad) for line in item.lines)
            elif isinstance(item, Cond):
                lines.append(f"{{{{- if {item.test} }}}}")
                lines.extend(_emit([item.then], indent))
                lines.append("{{- else }}")
                lines.extend(_emit([item.otherwise], indent))
                lines.append("{{- end }}")
            elif isinstance(item, dict) and item:
                lines.extend(_emit(item, indent + 2, first_prefix=pad + "- "))
            else:
                lines.extend(_emit_entry(None, item, indent, "- "))
    if first_prefix is not None and isinstance(node, list):
        lines[0] = first_prefix + lines[0][len(pad) :]
    yield from lines


def render_template(document: dict[str, Any]) -> str:
    return "\n".join(_emit(document, 0)) + "\n"


# --- from the rendered overlays to templates -------------------------------------------------


Key = tuple[str, str, str]


def key_of(document: dict[str, Any]) -> Key:
    metadata = document["metadata"]
    return (document["kind"], metadata.get("namespace", ""), metadata["name"])


def kustomize(directory: pathlib.Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise SystemExit("gen_chart: kubectl is required on PATH (it renders the manifests)")
    done = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"gen_chart: kubectl kustomize {directory} failed:\n{done.stderr}")
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def merge(otherwise: Any, then: Any, test: str) -> Any:
    """One tree that is ``then`` when ``test`` holds and ``otherwise`` when not: equal parts
    shared, differing entries as :class:`Cond`."""
    if otherwise == then:
        return otherwise
    if isinstance(otherwise, dict) and isinstance(then, dict):
        merged = {}
        for key in [*otherwise, *(k for k in then if k not in otherwise)]:
            if key in otherwise and key in then:
                merged[key] = merge(otherwise[key], then[key], test)
            else:
                merged[key] = Cond(test, then.get(key, MISSING), otherwise.get(key, MISSING))
        return merged
    if (
        isinstance(otherwise, list)
        and isinstance(then, list)
        and len(otherwise) == len(then)
        and all(
            isinstance(a, dict) and isinstance(b, dict)
            for a, b in zip(otherwise, then, strict=True)
        )
        # Items are paired by position only where their names agree (kustomize may reorder).
        and [a.get("name") for a in otherwise] == [b.get("name") for b in then]
    ):
        items = []
        for a, b in zip(otherwise, then, strict=True):
            item = merge(a, b, test)
            shared = isinstance(item, dict) and any(not isinstance(v, Cond) for v in item.values())
            items.append(item if shared else Cond(test, b, a))
        return items
    return Cond(test, then, otherwise)


def _flag_lines(component: str) -> tuple[str, ...]:
    lines: list[str] = []
    for flag in FLAGS:
        if component not in flag.components:
            continue
        path = f".Values.{flag.value}"
        if flag.kind == "string":
            rendered = f'{{{{ printf "{flag.flag}=%s" . | quote }}}}'
        elif flag.kind == "list":
            rendered = f'{{{{ printf "{flag.flag}=%s" (join "," .) | quote }}}}'
        else:
            # range over a map visits its keys in order: the same values, the same argument.
            rendered = (
                "{{ $gates := list }}{{ range $k, $v := . }}"
                '{{ $gates = append $gates (printf "%s=%t" $k $v) }}{{ end }}'
                f'{{{{ printf "{flag.flag}=%s" (join "," $gates) | quote }}}}'
            )
        lines += [f"{{{{- with {path} }}}}", "{pad}- " + rendered, "{{- end }}"]
    lines += [
        f"{{{{- range .Values.{component}.extraArgs }}}}",
        "{pad}- {{ . | quote }}",
        "{{- end }}",
    ]
    return tuple(lines)


def substitute(document: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the fields admins change read from values; their rendered values go
    into ``values`` as the defaults."""
    document = copy.deepcopy(document)
    kind, name = document["kind"], document["metadata"]["name"]
    if kind == "CustomResourceDefinition":
        document["metadata"].setdefault("annotations", {}).update(KEEP)
    if kind == "Deployment" and name in COMPONENTS:
        component = COMPONENTS[name]
        own = values.setdefault(component, {})
        spec = document["spec"]
        own["replicas"] = spec["replicas"]
        spec["replicas"] = Expr(f"{{{{ .Values.{component}.replicas }}}}")
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        repository, _, tag = container["image"].rpartition(":")
        values["image"] = {"repository": repository, "tag": "", "pullPolicy": "IfNotPresent"}
        values["_appVersion"] = tag
        container["image"] = Expr(
            '"{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"'
        )
        values["image"]["pullPolicy"] = container["imagePullPolicy"]
        container["imagePullPolicy"] = Expr("{{ .Values.image.pullPolicy }}")
        own["resources"] = container["resources"]
        container["resources"] = Block(f".Values.{component}.resources")
        container["args"] = [*container["args"], Extras(_flag_lines(component))]
        own["extraArgs"] = []
        own["affinity"] = pod.get("affinity", {})
        placed = {}
        for field, key in (("nodeSelector", "nodeSelector"), ("tolerations", "tolerations")):
            own[key] = pod.get(field) or ({} if field == "nodeSelector" else [])
            placed[field] = With(f".Values.{component}.{key}")
        placed["affinity"] = With(f".Values.{component}.affinity")
        pod.pop("affinity", None)
        rebuilt = {}
        for key, value in pod.items():
            if key == "containers":
                rebuilt.update(placed)
            rebuilt[key] = value
        spec["template"]["spec"] = rebuilt
    if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        values.setdefault("webhook", {})["externalURL"] = ""
        external = ".Values.webhook.externalURL"
        for webhook in document["webhooks"]:
            service = webhook["clientConfig"].pop("service")
            url = Expr(f'{{{{ printf "%s{service["path"]}" {external} | quote }}}}')
            webhook["clientConfig"] = {
                "url": Cond(external, url, MISSING),
                "service": Cond(f"not {external}", service, MISSING),
                **webhook["clientConfig"],
            }
    return document


@dataclasses.dataclass
class Chart:
    templates: dict[str, str]
    values: dict[str, Any]


def monitoring_condition(document: dict[str, Any]) -> str:
    if document["kind"] == "ConfigMap":
        return ".Values.monitoring.dashboard.enabled"
    return ".Values.monitoring.serviceMonitor.enabled"


def build(manifests: pathlib.Path) -> Chart:
    overlays = manifests / "overlays"
    default = {key_of(d): d for d in kustomize(overlays / "default")}
    certs = {key_of(d): d for d in kustomize(overlays / "cert-manager")}
    monitoring = {key_of(d): d for d in kustomize(overlays / "monitoring")}
    values: dict[str, Any] = {}
    files: dict[Key, tuple[str | None, Any]] = {}
    for key in [*default, *(k for k in certs if k not in default)]:
        if key in default and key in certs:
            merged = merge(
                substitute(default[key], values), substitute(certs[key], {}), CERT_MANAGER
            )
            files[key] = (None, merged)
        elif key in default:
            files[key] = (SELF_MANAGED, substitute(default[key], values))
        else:
            files[key] = (CERT_MANAGER, substitute(certs[key], {}))
    for key, document in monitoring.items():
        if key in default:
            if default[key] != document:
                raise SystemExit(f"gen_chart: overlays/monitoring changes {key}: not supported")
            continue
        files[key] = (monitoring_condition(document), substitute(document, values))
    templates = {}
    for (kind, _, name), (condition, document) in files.items():
        text = render_template(document)
        if condition is not None:
            text = f"{{{{- if {condition} }}}}\n{text}{{{{- end }}}}\n"
        templates[f"{kind.lower()}-{name}.yaml"] = text
    return Chart(templates, values)


# --- the chart's files -----------------------------------------------------------------------


def values_document(values: dict[str, Any]) -> dict[str, Any]:
    components = {
        component: {
            "replicas": values[component]["replicas"],
            "resources": values[component]["resources"],
            "nodeSelector": values[component]["nodeSelector"],
            "tolerations": values[component]["tolerations"],
            "affinity": values[component]["affinity"],
            "extraArgs": [],
        }
        for component in ("operator", "webhook")
    }
    components["webhook"]["externalURL"] = ""
    return {
        "image": values["image"],
        **components,
        **{flag.value: {"string": "", "list": [], "gates": {}}[flag.kind] for flag in FLAGS},
        "certificates": {"mode": "self-managed"},
        "monitoring": {"serviceMonitor": {"enabled": False}, "dashboard": {"enabled": False}},
    }


VALUES_HEADER = """\
# Values of the queuetree chart. Generated by hack/gen_chart.py from manifests/ (the defaults
# are what `kubectl kustomize manifests/overlays/default` renders): edit manifests/ and
# regenerate, not this file. Every value is described in values.schema.json and
# docs/operations.md ("Install", "With Helm").
"""


def _component_schema(component: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "replicas": {
                "type": "integer",
                "minimum": 0,
                "description": f"Replicas of the {component} (one leads; the others stand by)"
                if component == "operator"
                else "Replicas of the webhook (all serve; keep two on the pod create path)",
            },
            "resources": {"type": "object", "description": "The container's resources"},
            "nodeSelector": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Node labels the pods must match",
            },
            "tolerations": {"type": "array", "items": {"type": "object"}},
            "affinity": {"type": "object", "description": "Replaces the default anti-affinity"},
            "extraArgs": {
                "type": "array",
                "items": {"type": "string", "pattern": "^--[a-z0-9-]+(=.*)?$"},
                "description": f"More flags of `queuetree {component}` (docs/configuration.md)",
            },
            **extra,
        },
    }


def schema_document() -> dict[str, Any]:
    flag_schemas: dict[str, Any] = {}
    for flag in FLAGS:
        if flag.kind == "string":
            schema: dict[str, Any] = {"type": "string"}
        elif flag.kind == "list":
            schema = {"type": "array", "items": {"type": "string", "minLength": 1}}
        else:
            schema = {"type": "object", "additionalProperties": {"type": "boolean"}}
        flag_schemas[flag.value] = {**schema, "description": f"{flag.flag}: {flag.description}"}
    return {
        "$schema": "https://json-schema.org/draft-07/schema#",
        "title": "queuetree chart values",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "image": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "repository": {"type": "string", "minLength": 1},
                    "tag": {
                        "type": "string",
                        "description": "Empty: the chart's appVersion (its own release)",
                    },
                    "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                },
            },
            "operator": _component_schema("operator", {}),
            "webhook": _component_schema(
                "webhook",
                {
                    "externalURL": {
                        "type": "string",
                        "pattern": "^(https://[^/]+)?$",
                        "description": "Where the API server calls a webhook that runs outside "
                        "the cluster (https://HOST:PORT); empty: the queuetree-webhook Service",
                    }
                },
            ),
            **flag_schemas,
            "certificates": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "mode": {
                        "enum": ["self-managed", "cert-manager"],
                        "description": "self-managed: the webhook issues and renews its own "
                        "certificate and caBundle; cert-manager: cert-manager (installed "
                        "beforehand) issues it and injects the caBundle",
                    }
                },
            },
            "monitoring": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "serviceMonitor": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "enabled": {
                                "type": "boolean",
                                "description": "Metrics Services and a ServiceMonitor (needs "
                                "the Prometheus Operator's CRDs)",
                            }
                        },
                    },
                    "dashboard": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "enabled": {
                                "type": "boolean",
                                "description": "The Grafana dashboard as a ConfigMap for "
                                "Grafana's sidecar (label grafana_dashboard)",
                            }
                        },
                    },
                },
            },
        },
    }


NOTES = """\
queuetree {{ .Chart.AppVersion }} is installed in the namespace queuetree-system.
{{- if eq .Values.certificates.mode "cert-manager" }}
Certificates: cert-manager issues the webhook's certificate and injects the caBundle.
{{- else }}
Certificates: the webhook issues and renews its own (Secret queuetree-webhook-certs).
{{- end }}

Opt pods in with the annotation scheduling.volcano.sh/queue-allocation-gate: "true", or a
namespace with the label of the same key. See the queues with:
  kubectl get queues

`helm uninstall` keeps the CRDs, and so every Queue and PodGroup; pods still waiting behind
the queue gate stay pending until queuetree runs again (docs/operations.md, "Uninstall").
"""


def project_version(root: pathlib.Path) -> str:
    return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])


def write(chart: Chart, out: pathlib.Path, *, version: str) -> None:
    if chart.values.get("_appVersion") != version:
        raise SystemExit(
            f"gen_chart: the manifests run the image tag {chart.values.get('_appVersion')!r}, "
            f"but pyproject.toml's version is {version!r}: they must agree "
            "(tests/deploy/test_manifests.py)"
        )
    if out.exists():
        shutil.rmtree(out)
    (out / "templates").mkdir(parents=True)
    metadata = {
        "apiVersion": "v2",
        "name": CHART,
        "description": "Hierarchical queue admission for Kubernetes (Volcano-compatible "
        "queues): the operator and the admission webhook",
        "type": "application",
        "version": version,
        "appVersion": version,
        "kubeVersion": ">=1.30.0-0",
        "keywords": ["scheduling", "queues", "volcano", "batch"],
    }
    header = "# Generated by hack/gen_chart.py from manifests/: do not edit.\n"
    (out / "Chart.yaml").write_text(header + yaml.safe_dump(metadata, sort_keys=False))
    (out / "values.yaml").write_text(
        VALUES_HEADER + yaml.safe_dump(values_document(chart.values), sort_keys=False, width=100)
    )
    (out / "values.schema.json").write_text(json.dumps(schema_document(), indent=2) + "\n")
    (out / ".helmignore").write_text(header)
    for name, text in sorted(chart.templates.items()):
        (out / "templates" / name).write_text(header + text)
    (out / "templates" / "NOTES.txt").write_text(NOTES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifests", type=pathlib.Path, default=ROOT / "manifests")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "charts" / CHART)
    parser.add_argument(
        "--version", help="the chart's version (default: pyproject.toml's beside --manifests)"
    )
    args = parser.parse_args(argv)
    manifests = args.manifests.resolve()
    version = args.version or project_version(manifests.parent)
    write(build(manifests), args.out, version=version)
    print(f"gen_chart: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
