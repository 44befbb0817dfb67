"""kubesim over HTTPS and its ServiceAccount tokens: `kubectl create token` (TokenRequest), then
kubectl with that token authenticates as the ServiceAccount, until it expires or the account is
deleted. (kubectl sends a bearer token only over HTTPS, hence TLS.)"""

from __future__ import annotations

import base64
import datetime
import json
import pathlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from kubesim import errors, harness, kubeconfigs, tokens


@pytest.fixture
def secure(tmp_path: pathlib.Path) -> Iterator[harness.Cluster]:
    with harness.running(tmp_path, tls=True) as cluster:
        yield cluster


def as_token(cluster: harness.Cluster, token: str, tmp_path: pathlib.Path) -> harness.Cluster:
    """The same server seen through a kubeconfig that holds ``token``."""
    kubeconfig = kubeconfigs.write_kubeconfig(
        tmp_path / "token-kubeconfig",
        url=cluster.url,
        token=token,
        ca_bundle=cluster.sim.ca_bundle,
    )
    return harness.Cluster(cluster.sim, kubeconfig, cluster.cache_dir)


def create_token(cluster: harness.Cluster, account: str, *args: str) -> str:
    result = cluster.kubectl("create", "token", account, "-n", "default", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_kubesim_serves_https_with_a_ca_the_kubeconfig_carries(
    secure: harness.Cluster,
) -> None:
    result = secure.kubectl("get", "namespaces", "-o", "name")
    kubeconfig = json.loads(secure.kubectl("config", "view", "--raw", "-o", "json").stdout)
    cluster = kubeconfig["clusters"][0]["cluster"]
    assert (
        result.returncode,
        secure.url.startswith("https://127.0.0.1:"),
        cluster["certificate-authority-data"] == secure.sim.ca_bundle,
        "namespace/default" in result.stdout,
    ) == (0, True, True, True), result.stderr


def test_a_token_authenticates_kubectl_as_its_service_account(
    secure: harness.Cluster, tmp_path: pathlib.Path
) -> None:
    assert secure.kubectl("create", "serviceaccount", "tenant", "-n", "default").returncode == 0
    tenant = as_token(secure, create_token(secure, "tenant"), tmp_path)
    secure.sim.clear_audit()
    listed = tenant.kubectl("get", "pods", "-n", "default")
    users = {(r.user, r.verb, r.resource) for r in secure.sim.audit()}
    assert (listed.returncode, users) == (
        0,
        {("system:serviceaccount:default:tenant", "list", "pods")},
    ), listed.stderr


def test_the_token_carries_the_claims_of_a_bound_service_account_token(
    secure: harness.Cluster,
) -> None:
    assert secure.kubectl("create", "serviceaccount", "tenant", "-n", "default").returncode == 0
    token = create_token(secure, "tenant", "--duration=20m", "--audience=example")
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    account = json.loads(
        secure.kubectl("get", "sa", "tenant", "-n", "default", "-o", "json").stdout
    )
    assert (
        claims["sub"],
        claims["aud"],
        claims["exp"] - claims["iat"],
        claims["kubernetes.io"]["serviceaccount"],
    ) == (
        "system:serviceaccount:default:tenant",
        ["example"],
        1200,
        {"name": "tenant", "uid": account["metadata"]["uid"]},
    )


class RefusedRequestsCase(NamedTuple):
    args: Any
    message: Any


REFUSED_REQUESTS = {
    "a missing service account": RefusedRequestsCase(
        args=("create", "token", "nobody", "-n", "default"),
        message='serviceaccounts "nobody" not found',
    ),
    "a duration under ten minutes": RefusedRequestsCase(
        args=("create", "token", "tenant", "-n", "default", "--duration=1m"),
        message='TokenRequest.authentication.k8s.io "tenant" is invalid: spec.expirationSeconds: '
        "Invalid value: 60: may not specify a duration less than 10 minutes",
    ),
}


@pytest.mark.parametrize(
    ("args", "message"), list(REFUSED_REQUESTS.values()), ids=list(REFUSED_REQUESTS)
)
def test_a_token_request_is_refused_as_kube_apiserver_refuses_it(
    secure: harness.Cluster, args: tuple[str, ...], message: str
) -> None:
    assert secure.kubectl("create", "serviceaccount", "tenant", "-n", "default").returncode == 0
    result = secure.kubectl(*args)
    assert (result.returncode, message in result.stderr) == (1, True), result.stderr


def test_a_token_stops_working_when_its_service_account_is_deleted_and_recreated(
    secure: harness.Cluster, tmp_path: pathlib.Path
) -> None:
    assert secure.kubectl("create", "serviceaccount", "tenant", "-n", "default").returncode == 0
    tenant = as_token(secure, create_token(secure, "tenant"), tmp_path)
    assert secure.kubectl("delete", "serviceaccount", "tenant", "-n", "default").returncode == 0
    assert secure.kubectl("create", "serviceaccount", "tenant", "-n", "default").returncode == 0
    refused = tenant.kubectl("get", "pods", "-n", "default")
    assert (refused.returncode, "Unauthorized" in refused.stderr) == (1, True), refused.stderr


NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

SERVICE_ACCOUNT_USER = {
    "username": "system:serviceaccount:ns:sa",
    "uid": "u1",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"],
}


class IssuedTokensCase(NamedTuple):
    at: Any
    expected: Any


ISSUED_TOKENS = {
    "fresh": IssuedTokensCase(at=NOW, expected=SERVICE_ACCOUNT_USER),
    "a second before its expiry": IssuedTokensCase(
        at=NOW + datetime.timedelta(seconds=3599), expected=SERVICE_ACCOUNT_USER
    ),
    "at its expiry": IssuedTokensCase(at=NOW + datetime.timedelta(hours=1), expected=401),
    "long after": IssuedTokensCase(at=NOW + datetime.timedelta(days=1), expected=401),
}


@pytest.mark.parametrize(("at", "expected"), list(ISSUED_TOKENS.values()), ids=list(ISSUED_TOKENS))
def test_an_issued_token_authenticates_until_it_expires(
    at: datetime.datetime, expected: object
) -> None:
    clock = [NOW]
    issuer = tokens.Issuer(now=lambda: clock[0])
    token, answer = issuer.issue(namespace="ns", name="sa", uid="u1", request={"spec": {}})
    clock[0] = at
    outcome: object
    try:
        outcome = issuer.authenticate(token, service_account_uid=lambda ns, name: "u1")
    except errors.ApiError as exc:
        outcome = exc.code
    assert (outcome, answer["status"]["expirationTimestamp"]) == (expected, "2026-01-01T01:00:00Z")


def test_a_token_kubesim_never_issued_is_left_to_the_configured_users() -> None:
    issuer = tokens.Issuer()
    assert issuer.authenticate("admin", service_account_uid=lambda ns, name: "u1") is None
