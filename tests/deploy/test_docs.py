"""The deployment docs stay in step with the manifests they describe."""

from __future__ import annotations

import argparse
import pathlib
import re

import pytest

from queuetree import cli
from tests.deploy import test_manifests

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OWN_DOCS = ["concepts.md", "configuration.md", "operations.md"]


def anchors(markdown: str) -> set[str]:
    """GitHub-style heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("document", OWN_DOCS)
def test_links_between_the_deployment_docs_reach_their_headings(document: str) -> None:
    text = (DOCS / document).read_text(encoding="utf-8")
    broken = []
    for target, anchor in re.findall(r"\]\(([\w\-]*\.md)?#?([\w\-]*)\)", text):
        if target and target not in OWN_DOCS:
            continue  # other components' documents are checked by their owners
        path = DOCS / (target or document)
        if anchor and anchor not in anchors(path.read_text(encoding="utf-8")):
            broken.append(f"{target or document}#{anchor}")
    assert broken == []


@pytest.mark.parametrize("deployment", ["queuetree-operator", "queuetree-webhook"])
def test_every_flag_the_manifests_pass_is_documented(deployment: str) -> None:
    objects = test_manifests.overlay("default")
    pod = test_manifests.one(objects, "Deployment", deployment)["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    flags = [arg.split("=")[0] for arg in container["args"] if arg.startswith("--")]
    documented = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert [f for f in flags if f"`{f}`" not in documented] == []


def test_every_overlay_is_documented() -> None:
    overlays = sorted(p.name for p in (ROOT / "manifests" / "overlays").iterdir() if p.is_dir())
    documented = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert (overlays, [o for o in overlays if f"manifests/overlays/{o}`" not in documented]) == (
        sorted([*test_manifests.OVERLAYS, "monitoring"]),
        [],
    )


def option_strings(command: str) -> set[str]:
    """Every ``--flag`` spelling the ``queuetree <command>`` parser accepts."""
    parser = cli.build_parser()
    (subparsers,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    subparser: argparse.ArgumentParser = subparsers.choices[command]
    return set(subparser._option_string_actions)


def documented_flags(section: str) -> list[str]:
    """Flags named in the table of ``### `queuetree <section>``` in configuration.md."""
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    body = text.split(f"### `queuetree {section}`", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("| `--")]
    return [flag for row in rows for flag in re.findall(r"`(--[a-z0-9-]+)`", row.split("|")[1])]


@pytest.mark.parametrize("command", ["operator", "webhook"])
def test_every_documented_flag_exists_in_the_command(command: str) -> None:
    documented = documented_flags(command)
    assert (documented != [], sorted(set(documented) - option_strings(command))) == (True, [])


def documented_defaults(document: str) -> dict[str, str]:
    """``--flag`` -> the default column of every flag table row of ``document``."""
    rows = {}
    for line in (DOCS / document).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`--"):
            for flag in re.findall(r"`(--[a-z0-9-]+)", cells[0]):
                rows[flag] = cells[1].strip("`")
    return rows


LIMIT_FLAGS = [
    "--http-header-timeout",
    "--http-idle-timeout",
    "--http-request-timeout",
    "--http-keepalive-timeout",
    "--max-connections",
    "--max-connection-rate",
    "--max-request-body-bytes",
    "--max-json-depth",
    "--max-json-elements",
]


def test_the_documented_transport_limits_are_the_flags_defaults() -> None:
    """The defaults live once, in ``listening.Limits``; the flags take theirs from it, and
    docs/webhook.md must say the same."""
    parser = cli.build_parser()
    (subparsers,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = subparsers.choices["webhook"]._option_string_actions
    actual = {flag: f"{actions[flag].default:.15g}" for flag in LIMIT_FLAGS}
    documented = documented_defaults("webhook.md")
    assert actual == {flag: documented.get(flag) for flag in LIMIT_FLAGS}


def test_every_file_the_map_of_changes_names_exists() -> None:
    # docs/changes.md is a map: a renamed or split module must move its entries too.
    text = (DOCS / "changes.md").read_text(encoding="utf-8")
    named = set(
        re.findall(
            r"`((?:queuetree|crds|tests|manifests|docs|benchmarks)/[\w/.\-]*?)(?::[^`]*)?`", text
        )
    )
    assert named, "the map names no file"
    missing = sorted(
        path for path in named if "<" not in path and not (ROOT / path.rstrip("/")).exists()
    )
    assert missing == []
