"""``queuetree operator``: flags become settings; an unreadable configuration is exit 2."""

from __future__ import annotations

import dataclasses
import gc
import pathlib
import sys
from typing import Any, NamedTuple

import pytest

from queuetree import cli
from queuetree.api import schedconf
from queuetree.cli import operator as command
from queuetree.core import features

DEFAULT = schedconf.parse_default().configuration


def settings_for(*flags: str) -> dict[str, Any]:
    args = cli.build_parser().parse_args(["operator", *flags])
    built = command.build_settings(args, DEFAULT)
    fields = {
        field.name: getattr(built, field.name)
        for field in dataclasses.fields(built)
        if field.name not in ("scheduler_config", "identity")
    }
    fields["feature_gates"] = dict(fields["feature_gates"])
    return fields


DEFAULTS = {
    "feature_gates": dict(features.DEFAULTS),
    "gate_workers": 5,
    "qps": 50.0,
    "burst": 100,
    "cycle_period": 1.0,
    "debounce": 0.02,
    "pace": 1.0,
    "min_interval": 0.1,
    "backlog_wait": 5.0,
    "explanation_budget": 400,
    "status_writers": 16,
    "event_writers": 2,
    "figures_interval": 5.0,
    "busy_figures_factor": 5.0,
    "eviction_retry": 10.0,
    "metrics_port": 8080,
    "health_port": 0,
    "leader_elect": True,
    "lease_name": "queuetree-operator",
    "lease_namespace": "kube-system",
    "lease_duration": 15.0,
    "renew_deadline": 10.0,
    "retry_period": 2.0,
    "default_queue": "default",
    "scheduler_names": frozenset({"default-scheduler"}),
    "placing_scheduler": "default-scheduler",
    "adopted_scheduler_names": frozenset({"volcano"}),
    "inqueue_timeout": 300.0,
    "native_pod_groups": "auto",
}


class CasesCase(NamedTuple):
    flags: Any
    changed: Any


CASES = {
    "no flags gives the documented defaults": CasesCase(flags=(), changed={}),
    "workers, rates and period": CasesCase(
        flags=(
            "--gate-removal-worker-num=16",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--schedule-period=0.5",
        ),
        changed={"gate_workers": 16, "qps": 200.0, "burst": 400, "cycle_period": 0.5},
    ),
    "fewer than one worker means five, as Volcano": CasesCase(
        flags=("--gate-removal-worker-num=0",),
        changed={"gate_workers": 5},
    ),
    "the deployment's spelling of the lease namespace and a health port": CasesCase(
        flags=("--leader-election-namespace=queuetree-system", "--health-port=8081"),
        changed={"lease_namespace": "queuetree-system", "health_port": 8081},
    ),
    "scheduler names, repeated or comma-separated, replace the default": CasesCase(
        flags=("--scheduler-name=default-scheduler,gpu-profile", "--scheduler-name", "volcano"),
        changed={"scheduler_names": frozenset({"default-scheduler", "gpu-profile", "volcano"})},
    ),
    "the first scheduler name places adopted pods": CasesCase(
        flags=("--scheduler-name=gpu-profile,default-scheduler", "--scheduler-name=other"),
        changed={
            "scheduler_names": frozenset({"default-scheduler", "gpu-profile", "other"}),
            "placing_scheduler": "gpu-profile",
        },
    ),
    "adopted scheduler names, or none": CasesCase(
        flags=("--adopt-scheduler-names=volcano, yunikorn",),
        changed={"adopted_scheduler_names": frozenset({"volcano", "yunikorn"})},
    ),
    "adoption turned off": CasesCase(
        flags=("--adopt-scheduler-names=",),
        changed={"adopted_scheduler_names": frozenset()},
    ),
    "the Inqueue bound, or none at all": CasesCase(
        flags=("--inqueue-timeout=20",),
        changed={"inqueue_timeout": 20.0},
    ),
    "no Inqueue bound (Volcano)": CasesCase(
        flags=("--inqueue-timeout=0",),
        changed={"inqueue_timeout": 0.0},
    ),
    "native PodGroups forced on, or off (Go booleans)": CasesCase(
        flags=("--native-pod-groups=1",),
        changed={"native_pod_groups": "true"},
    ),
    "native PodGroups off": CasesCase(
        flags=("--native-pod-groups=False",),
        changed={"native_pod_groups": "false"},
    ),
    "booleans and feature gates in Kubernetes style": CasesCase(
        flags=("--leader-elect=false", "--feature-gates=SchedulingGatesQueueAdmission=false"),
        changed={"leader_elect": False, "feature_gates": {"SchedulingGatesQueueAdmission": False}},
    ),
}


@pytest.mark.parametrize(("flags", "changed"), list(CASES.values()), ids=list(CASES))
def test_flags_become_settings(flags: tuple[str, ...], changed: dict[str, Any]) -> None:
    assert settings_for(*flags) == {**DEFAULTS, **changed}


def test_an_unreadable_configuration_is_a_usage_error(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "scheduler.conf"
    broken.write_text("actions: [\n")
    assert cli.main(["operator", f"--config={broken}"]) == 2
    assert f"--config={broken}" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "soon", "nan"], ids=["negative", "a word", "nan"])
def test_an_inqueue_timeout_that_is_no_duration_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["operator", f"--inqueue-timeout={value}"])
    assert (exit_info.value.code, "--inqueue-timeout" in capsys.readouterr().err) == (2, True)


def test_the_configuration_file_is_read(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "scheduler.conf"
    path.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: capacity\n')
    assert command.load_config(str(path)).actions == ("enqueue", "allocate")


def test_the_interpreter_is_tuned_for_the_operator() -> None:
    """The switch interval and the collector's thresholds are the module's, and process-wide:
    the test puts back what it changed."""
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    try:
        command.tune_interpreter()
        assert sys.getswitchinterval() == pytest.approx(command.SWITCH_INTERVAL)
        assert gc.get_threshold() == command.GC_THRESHOLDS
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
