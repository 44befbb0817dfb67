"""Least privilege, checked against what the components actually do.

The sandbox stack runs the real operator and webhook against kubesim, each with its own bearer
token (its ServiceAccount's user name), and the tour scenario (examples/sandbox/tour.yaml)
drives them through every kind of write they make: root and default queues, parents
defaulted, queue status, gate removal, explanations and their events, pod group status, a
reclaim eviction, the close cascade, leader election, the webhook's certificate Secret and CA
bundles. kubesim's audit log then holds every request each one made.

Each request must be allowed by the ClusterRoles and Roles that ``kubectl kustomize`` renders
from manifests/overlays/default and binds to that ServiceAccount (RBAC's rules: group,
resource/subresource, verb, resourceNames, and a Role only in its own namespace). Rules that no
request used are reported on the terminal: each is either needed for a path the tour does not
take (said in the manifests' comments) or a candidate for removal.
"""

from __future__ import annotations

import collections
import pathlib
import subprocess
from typing import Any

import pytest
import yaml

from e2e import support
from queuetree.sandbox import scenarios, stack

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOUR = ROOT / "examples" / "sandbox" / "tour.yaml"
COMPONENTS = {
    stack.OPERATOR.username: "queuetree-operator",
    stack.WEBHOOK.username: "queuetree-webhook",
}


def rendered(overlay: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / overlay)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(scope="module")
def audit(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    """The audit log of the operator's and the webhook's requests during the tour."""
    scenario = scenarios.load(TOUR)
    options = stack.Options(
        workdir=tmp_path_factory.mktemp("rbac"),
        nodes_files=scenario.nodes_files,
        node_flags=scenario.node_flags,
    )
    running = stack.start(options)
    try:
        failures = scenarios.Runner(running.kubectl, settle=scenario.settle).run(scenario)
        assert failures == []
    finally:
        codes = running.stop()
    assert codes == {"operator": 0, "webhook": 0, "kubesim": 0}
    return [record for record in running.audit() if record["user"] in COMPONENTS]


@pytest.mark.timeout(300)
def test_every_call_of_each_component_is_allowed_by_its_roles_and_unused_rules_are_reported(
    audit: list[dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    objects = rendered("manifests/overlays/default")
    denied: dict[str, set[tuple[str, ...]]] = collections.defaultdict(set)
    unused: dict[str, list[str]] = {}
    for user, account in COMPONENTS.items():
        rules = support.bound_rules(objects, account)
        calls = [c for c in audit if c["user"] == user]
        used: set[tuple[str, str, str, str]] = set()
        for call in calls:
            matching = [r for r in rules if r.allows(call)]
            if not matching:
                denied[account].add(
                    (
                        call["verb"],
                        call["group"] or "core",
                        call["resource"]
                        + (f"/{call['subresource']}" if call["subresource"] else ""),
                        call["namespace"] or "(cluster)",
                        call["name"],
                    )
                )
            resource = call["resource"] + (f"/{call['subresource']}" if call["subresource"] else "")
            for rule in matching:
                used.add((rule.role, call["group"], resource, call["verb"]))
        unused[account] = sorted(
            f"{rule.role}: {verb} {group or 'core'}/{resource}"
            for rule in rules
            for grant in rule.grants()
            for group, resource, verb in [(grant.groups[0], grant.resources[0], grant.verbs[0])]
            if not any(
                u[0] == rule.role
                and u[3] == verb
                and (group == "*" or u[1] == group)
                and (resource == "*" or u[2] == resource)
                for u in used
            )
        )
    with capsys.disabled():  # the report is for whoever runs the tests, pass or fail
        for account, lines in unused.items():
            print(f"\n{account}: rules the tour never exercised ({len(lines)}):")
            for line in lines:
                print(f"  {line}")
    counts = collections.Counter(c["user"] for c in audit)
    assert (dict(denied), all(counts[user] > 0 for user in COMPONENTS)) == ({}, True), counts
