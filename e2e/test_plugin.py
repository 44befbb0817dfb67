"""``kubectl queuetree`` as a user runs it: the plugin on PATH, kubectl with the user's
kubeconfig, and what each command prints, checked against the cluster."""

from __future__ import annotations

import json
import pathlib

import pytest

from e2e import support

CPU = {"cpu": "1", "memory": "16Mi"}


@pytest.fixture
def full_queue(kube: support.Kube) -> tuple[str, str]:
    """A parent and a leaf with room for one pod: ``run`` runs, ``wait-a`` and ``wait-b``
    wait behind the gate (each told why)."""
    parent, leaf = support.unique("pl"), support.unique("pl")
    kube.must(kube.apply(support.queue(parent), support.queue(leaf, parent=parent, capability=CPU)))
    kube.must(kube.apply(support.pod("run", namespace=kube.namespace, queue=leaf, requests=CPU)))
    support.eventually(lambda: kube.running("run"), what="the first pod runs")
    for name in ("wait-a", "wait-b"):
        kube.must(kube.apply(support.pod(name, namespace=kube.namespace, queue=leaf, requests=CPU)))
    for name in ("wait-a", "wait-b"):
        support.eventually(lambda n=name: bool(kube.explanation(n)), what=f"{name} is explained")
    return parent, leaf


def row_of(output: str, name: str) -> list[str]:
    """The first line of the tree that names ``name``, split into cells."""
    line = next(line for line in output.splitlines() if name in line)
    return line.replace("├", " ").replace("└", " ").replace("│", " ").split()


def test_tree_shows_each_queue_with_state_condition_figures_and_counts_in_80_columns(
    kube: support.Kube, full_queue: tuple[str, str]
) -> None:
    parent, leaf = full_queue
    done = kube.must(kube.plugin("tree"))
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["QUEUE", "STATE", "READY"]
    assert max(len(line) for line in lines) <= 80
    # Its name, state, condition; cpu used 1 of capability 1 (a full bar); gated 2, admitted
    # 0, running 1.
    row = row_of(done.stdout, leaf)
    assert (row[:4], row[-5:]) == ([leaf, "Open", "Ready", "cpu"], ["1", "████████", "2", "0", "1"])
    assert row_of(done.stdout, parent)[-3:] == ["2", "0", "1"]  # the subtree's pods


def test_pending_lists_the_queues_admission_order_and_explain_agrees(
    kube: support.Kube, full_queue: tuple[str, str]
) -> None:
    _, leaf = full_queue
    pending = kube.must(kube.plugin("pending", leaf)).stdout
    rows = [line.split() for line in pending.splitlines()[1:]]
    order = {next(c for c in row if c.startswith(f"{kube.namespace}/")): row for row in rows}
    keys = {f"{kube.namespace}/wait-a", f"{kube.namespace}/wait-b"}
    assert set(order) == keys, pending
    for key in keys:
        position = next(cell for cell in order[key] if cell.endswith("/2"))
        explained = kube.must(kube.plugin("explain", key.split("/")[1], "-n", kube.namespace))
        text = " ".join(explained.stdout.split())
        number = position.split("/")[0]
        assert f"position {number} of 2 in the admission order of queue '{leaf}'" in text, text
        assert ("requested 1" in text, "to admit" in text) == (True, True), text


def test_explain_a_pod_group_names_the_group_its_queue_and_its_pods(kube: support.Kube) -> None:
    leaf = support.unique("pg")
    kube.must(kube.apply(support.queue(leaf, capability=CPU)))
    kube.must(
        kube.apply(support.pod_group("gang", namespace=kube.namespace, queue=leaf, min_member=2))
    )
    for name in ("m-0", "m-1"):
        kube.must(
            kube.apply(
                support.pod(name, namespace=kube.namespace, queue=leaf, requests=CPU, group="gang")
            )
        )
    support.eventually(lambda: bool(kube.explanation("m-0")), what="the gang is explained")
    text = kube.must(kube.plugin("explain", "podgroup/gang", "-n", kube.namespace)).stdout
    assert f"PodGroup {kube.namespace}/gang: queue '{leaf}', minMember 2" in text, text
    pods = [f"Pod {kube.namespace}/m-{index}" in text for index in range(2)]
    assert (pods, "waits" in text) == ([True, True], True), text


def test_whatif_shows_that_raising_the_capability_admits_the_waiting_pods(
    kube: support.Kube, full_queue: tuple[str, str], tmp_path: pathlib.Path
) -> None:
    parent, leaf = full_queue
    changes = tmp_path / "changes.yaml"
    raised = support.queue(leaf, parent=parent, capability={"cpu": "3", "memory": "64Mi"})
    submitted = support.pod("extra", namespace=kube.namespace, queue=leaf, requests=CPU)
    changes.write_text(json.dumps(raised) + "\n---\n" + json.dumps(submitted))
    done = kube.must(kube.plugin("whatif", "-f", str(changes)))
    text = done.stdout
    admitted = text.split("Admitted (")[1].split("Waiting (")[0]
    waiting = text.split("Waiting (")[1].split("Evicted (")[0]
    assert (admitted.startswith("2)"), waiting.startswith("1)")) == (True, True), text
    names = [f"{kube.namespace}/{name}" for name in ("wait-a", "wait-b", "extra")]
    assert ([n in admitted for n in names], names[2] in waiting) == ([True, True, False], True)
    assert "capability 3" in " ".join(waiting.split()), text
    # Nothing was applied: the pods still wait, and the submitted one does not exist.
    assert (kube.gated("wait-a"), kube.pod("extra") is None) == (True, True)


def test_close_and_open_write_the_request_and_the_operator_follows(kube: support.Kube) -> None:
    name = support.unique("co")
    kube.must(kube.apply(support.queue(name)))
    closed = kube.must(kube.plugin("close", name))
    assert f"queue {name}: close requested" in closed.stdout
    support.eventually(lambda: kube.readiness(name) == ("False", "Closed"), what="it closes")
    kube.must(kube.plugin("open", name))
    support.eventually(lambda: kube.readiness(name) == ("True", "Ready"), what="it opens")


def test_a_tenant_with_the_viewer_role_explains_its_own_pod(
    kube: support.Kube, full_queue: tuple[str, str]
) -> None:
    _, leaf = full_queue
    tenant = kube.as_tenant()
    kube.grant_viewer()
    done = tenant.must(tenant.plugin("explain", "wait-a", "-n", kube.namespace))
    assert f"queue       {leaf}" in done.stdout, done.stdout


@pytest.mark.backends("real", "existing", reason="kubesim authorizes every request: it has no RBAC")
def test_a_tenant_without_the_viewer_role_is_told_which_role_it_needs(
    kube: support.Kube,
) -> None:
    tenant = kube.as_tenant()
    done = tenant.plugin("tree")
    assert (done.returncode, "queuetree-viewer" in done.stderr) == (1, True), done.describe()
