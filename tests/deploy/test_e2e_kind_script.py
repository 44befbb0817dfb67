"""hack/e2e-kind.sh, run against stand-ins for docker, kind and kubectl.

No Docker engine runs on the development machines, so the script is driven here with small
stand-in commands that record their arguments; the tests compare the whole sequence of calls.
The real thing runs with ``make e2e-kind`` wherever Docker exists.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "e2e-kind.sh"

# Each stand-in appends "<tool> <args>" to $CALLS and answers the few queries the script makes.
STANDIN = textwrap.dedent(
    """\
    #!/usr/bin/env bash
    tool=$(basename "$0")
    echo "$tool $*" >>"$CALLS"
    case "$tool $*" in
      "kind get clusters") printf '%s\\n' $EXISTING_CLUSTERS ;;
      "kind get kubeconfig "*) echo "apiVersion: v1" ;;
      "kubectl get "*"caBundle}") printf '%s' "$CA_BUNDLE" ;;
      "pytest "*) kubeconfig=$(test -s "$KUBECONFIG" && echo yes)
                  existing=${QUEUETREE_E2E_EXISTING:-unset}
                  echo "KUBECONFIG is a file: $kubeconfig, existing cluster: $existing" >>"$CALLS"
                  exit "$PYTEST_EXIT" ;;
    esac
    exit 0
    """
)


def run_script(
    tmp_path: pathlib.Path,
    *,
    existing_clusters: str = "",
    ca_bundle: str = "Q0E=",
    pytest_exit: int = 0,
    keep_cluster: str = "0",
) -> tuple[int, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "kind", "kubectl", "pytest"):
        path = bin_dir / tool
        path.write_text(STANDIN, encoding="utf-8")
        path.chmod(0o755)
    calls = tmp_path / "calls.log"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "CALLS": str(calls),
        "EXISTING_CLUSTERS": existing_clusters,
        "CA_BUNDLE": ca_bundle,
        "PYTEST_EXIT": str(pytest_exit),
        "KEEP_CLUSTER": keep_cluster,
        "ARTIFACTS": str(tmp_path / "artifacts"),
        "E2E_PYTEST": "pytest e2e --e2e",
        "WAIT_TIMEOUT": "0",
    }
    done = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=False, timeout=60
    )
    lines = calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []
    return done.returncode, lines


INSTALL = [
    "docker build -t queuetree:e2e .",
    "kind load docker-image queuetree:e2e --name queuetree-e2e",
    "kubectl apply --server-side -k crds",
    "kubectl wait --for=condition=Established --timeout=0s"
    " crd/queues.scheduling.volcano.sh crd/podgroups.scheduling.volcano.sh",
    "kubectl apply --server-side -k manifests/overlays/e2e",
    "kubectl rollout status -n queuetree-system deployment/queuetree-webhook --timeout=0s",
    "kubectl rollout status -n queuetree-system deployment/queuetree-operator --timeout=0s",
    "kubectl get mutatingwebhookconfiguration/queuetree-mutating-webhook"
    " -o jsonpath={.webhooks[0].clientConfig.caBundle}",
    "kubectl get validatingwebhookconfiguration/queuetree-validating-webhook"
    " -o jsonpath={.webhooks[0].clientConfig.caBundle}",
]
CREATE = [
    "docker info",
    "kind get clusters",
    "kind create cluster --name queuetree-e2e --image kindest/node:v1.32.2 --wait 0s",
    "kind get kubeconfig --name queuetree-e2e",
]
COLLECT = [
    "kubectl get all,events -n queuetree-system -o wide",
    "kubectl logs -n queuetree-system deployment/queuetree-operator --all-containers --prefix"
    " --tail=-1",
    "kubectl logs -n queuetree-system deployment/queuetree-webhook --all-containers --prefix"
    " --tail=-1",
]


def artifacts_export(tmp_path: pathlib.Path) -> str:
    return f"kind export logs {tmp_path / 'artifacts' / 'kind'} --name queuetree-e2e"


def test_a_passing_run_creates_installs_tests_and_deletes_the_cluster(
    tmp_path: pathlib.Path,
) -> None:
    assert run_script(tmp_path) == (
        0,
        [
            *CREATE,
            *INSTALL,
            "pytest e2e --e2e",
            "KUBECONFIG is a file: yes, existing cluster: 1",
            "kind delete cluster --name queuetree-e2e",
        ],
    )


def test_a_failing_suite_collects_logs_deletes_the_cluster_and_keeps_the_exit_code(
    tmp_path: pathlib.Path,
) -> None:
    assert run_script(tmp_path, pytest_exit=1) == (
        1,
        [
            *CREATE,
            *INSTALL,
            "pytest e2e --e2e",
            "KUBECONFIG is a file: yes, existing cluster: 1",
            *COLLECT,
            artifacts_export(tmp_path),
            "kind delete cluster --name queuetree-e2e",
        ],
    )


def test_an_existing_cluster_is_reused_and_kept(tmp_path: pathlib.Path) -> None:
    assert run_script(tmp_path, existing_clusters="other queuetree-e2e") == (
        0,
        [
            "docker info",
            "kind get clusters",
            "kind get kubeconfig --name queuetree-e2e",
            *INSTALL,
            "pytest e2e --e2e",
            "KUBECONFIG is a file: yes, existing cluster: 1",
        ],
    )


def test_keep_cluster_keeps_a_cluster_the_run_created(tmp_path: pathlib.Path) -> None:
    code, calls = run_script(tmp_path, keep_cluster="1")
    assert (code, calls[-1]) == (0, "KUBECONFIG is a file: yes, existing cluster: 1")


def test_a_webhook_that_never_publishes_its_ca_fails_the_run_before_the_suite(
    tmp_path: pathlib.Path,
) -> None:
    assert run_script(tmp_path, ca_bundle="") == (
        2,
        [
            *CREATE,
            *INSTALL[:-1],
            *COLLECT,
            artifacts_export(tmp_path),
            "kind delete cluster --name queuetree-e2e",
        ],
    )


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("docker", "docker is not on PATH"),
        ("kind", "kind is not on PATH"),
        ("kubectl", "kubectl is not on PATH"),
    ],
)
def test_a_missing_tool_is_named_and_nothing_runs(
    tmp_path: pathlib.Path, missing: str, message: str
) -> None:
    # PATH holds only stand-ins for the other tools and the one system command the script
    # needs before its checks (dirname), so a real kind or kubectl on this machine is not found.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.log"
    for tool in {"docker", "kind", "kubectl"} - {missing}:
        (bin_dir / tool).write_text(STANDIN, encoding="utf-8")
        (bin_dir / tool).chmod(0o755)
    dirname = shutil.which("dirname")
    assert dirname is not None
    (bin_dir / "dirname").symlink_to(dirname)
    bash = shutil.which("bash")
    assert bash is not None
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "CALLS": str(calls)}
    done = subprocess.run(
        [bash, str(SCRIPT)], env=env, capture_output=True, text=True, check=False, timeout=60
    )
    assert (done.returncode, done.stderr.strip(), calls.exists()) == (
        2,
        f"e2e-kind: {message} (make e2e-kind needs Docker, kind and kubectl)",
        False,
    )
