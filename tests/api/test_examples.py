"""The examples apply unchanged: every Queue and PodGroup passes the CRD schemas, and the queue
tree obeys every rule the queue webhook enforces."""

from __future__ import annotations

import pathlib
from typing import Any

import jsonschema
import pytest
import yaml

from queuetree.api import manifest_files, queue_manifests
from queuetree.core import queue_trees, tree_rules

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE_FILES = sorted(
    [*(ROOT / "examples" / "queues").glob("*.yaml"), *(ROOT / "examples" / "pods").glob("*.yaml")]
)
CRDS = {
    "Queue": ROOT / "crds" / "scheduling.volcano.sh_queues.yaml",
    "PodGroup": ROOT / "crds" / "scheduling.volcano.sh_podgroups.yaml",
}


def custom_resources() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in EXAMPLE_FILES:
        for document in manifest_files.load_documents(path.read_text(), source=path.name):
            if document.manifest["kind"] in CRDS:
                found.append((document.origin, dict(document.manifest)))
    return found


def schema_of(kind: str) -> dict[str, Any]:
    crd = yaml.safe_load(CRDS[kind].read_text())
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


RESOURCES = custom_resources()


@pytest.mark.parametrize(("origin", "manifest"), RESOURCES, ids=[o for o, _ in RESOURCES])
def test_every_example_queue_and_pod_group_passes_its_crd_schema(
    origin: str, manifest: dict[str, Any]
) -> None:
    validator = jsonschema.Draft4Validator(schema_of(manifest["kind"]))
    assert [error.message for error in validator.iter_errors(manifest)] == []


def test_the_example_queue_tree_obeys_every_rule_of_the_queue_webhook() -> None:
    documents = manifest_files.load_documents(
        (ROOT / "examples" / "queues" / "hierarchy.yaml").read_text(), source="hierarchy.yaml"
    )
    queues = [queue_manifests.parse_queue(d.manifest, origin=d.origin) for d in documents]
    tree = queue_trees.QueueTree.of(queues)
    assert tree_rules.validate_tree(tree, max_depth=5) == {}


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[p.name for p in EXAMPLE_FILES])
def test_each_example_file_defines_a_priority_class_before_the_pods_that_name_it(
    path: pathlib.Path,
) -> None:
    """kubectl applies a file in order, and kube-apiserver's Priority admission refuses a pod
    naming a PriorityClass that does not exist yet (a server dry run cannot show this: it
    creates nothing, so the e2e suite creates the classes first)."""
    documents = [
        d.manifest for d in manifest_files.load_documents(path.read_text(), source=path.name)
    ]
    in_file = {d["metadata"]["name"] for d in documents if d["kind"] == "PriorityClass"}
    defined: set[str] = set()
    too_early = []
    for manifest in documents:
        if manifest["kind"] == "PriorityClass":
            defined.add(manifest["metadata"]["name"])
        named = (manifest.get("spec") or {}).get("priorityClassName")
        if manifest["kind"] == "Pod" and named in in_file and named not in defined:
            too_early.append(f"pod {manifest['metadata']['name']}: {named}")
    assert too_early == []
