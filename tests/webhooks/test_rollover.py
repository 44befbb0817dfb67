"""The CA rollover of self-managed certificates, as pure steps over a clock: what the Secret and
the caBundle hold at each step, and a simulation of replicas and a kube-apiserver that holds a
stale caBundle in which no replica ever serves a certificate the caBundle does not verify."""

from __future__ import annotations

import base64
import dataclasses
import datetime

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from queuetree.webhooks import certificates

SERVICE, NAMESPACE = "queuetree-webhook", "queuetree-system"
NAMES = certificates.service_dns_names(SERVICE, NAMESPACE)
CA_NAME = f"queuetree-webhook-ca.{NAMESPACE}"
INTERVAL = 10.0
"""``--cert-check-interval``'s default."""
OVERLAP = certificates.overlap(INTERVAL)
T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
"""When the rollover starts."""


def steady(*, made: datetime.datetime) -> certificates.Bundle:
    """A Secret's bundle as made at ``made``: one CA and the serving certificate it signed."""
    ca = certificates.generate_ca(common_name=CA_NAME, now=made)
    return certificates.Bundle(ca, certificates.issue_serving(ca, dns_names=NAMES, now=made))


def verifies(serving_pem: bytes, ca_bundle: str) -> bool:
    """Whether a caBundle holds the CA that signed a serving certificate (what Go's verifier
    asks of it; the names are covered by every certificate made here)."""
    serving = x509.load_pem_x509_certificate(serving_pem)
    for ca_pem in certificates.split_pem(base64.b64decode(ca_bundle)):
        try:
            serving.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def step(
    current: certificates.Bundle | None,
    *,
    at: datetime.timedelta,
    served: certificates.KeyPair | None = None,
    known: tuple[bytes, ...] = (),
) -> certificates.Step | None:
    return certificates.next_bundle(
        current,
        dns_names=NAMES,
        overlap=OVERLAP,
        ca_name=CA_NAME,
        served=served,
        known_cas=known,
        now=T0 + at,
    )


def bundle_of(found: certificates.Step | None) -> certificates.Bundle:
    assert found is not None
    return found.bundle


# -- the steps, one by one --------------------------------------------------------------------


def garbage_key(bundle: certificates.Bundle) -> certificates.Bundle:
    """The CA key edited to something that is not a key."""
    return dataclasses.replace(bundle, ca=certificates.KeyPair(bundle.ca.cert_pem, b"garbage"))


@dataclasses.dataclass(frozen=True)
class Start:
    """How a rollover starts: the Secret a replica reads, the pair it serves, the CAs of the
    caBundle, and whether the served pair is kept while the new CA is staged."""

    secret: certificates.Bundle | None
    served: certificates.KeyPair | None
    known: tuple[bytes, ...]
    staged: bool
    reason: str
    before: certificates.Bundle
    """The Secret before the rollover (whose pair the replicas serve)."""


def start(name: str) -> Start:
    made = T0 - datetime.timedelta(days=365 * 8)
    old_ca = certificates.generate_ca(common_name=CA_NAME, now=made)
    # The serving certificate was renewed by that CA a month ago (it lasts a year).
    old = certificates.Bundle(
        old_ca,
        certificates.issue_serving(old_ca, dns_names=NAMES, now=T0 - datetime.timedelta(days=30)),
    )
    recent = steady(made=T0 - datetime.timedelta(days=30))
    return {
        "ca-near-expiry": Start(old, old.serving, (), True, "the CA expires at", old),
        "ca-key-garbage": Start(
            garbage_key(recent),
            recent.serving,
            (),
            True,
            "unreadable CA certificate or key",
            recent,
        ),
        "secret-deleted-while-serving": Start(
            None, recent.serving, (recent.ca.cert_pem,), True, "the Secret is missing", recent
        ),
        # A replica that restarts finds no Secret: it has nothing to serve but a new pair; the
        # caBundle's CA stays for the replicas still serving the old one.
        "secret-deleted-then-restart": Start(
            None, None, (recent.ca.cert_pem,), False, "the Secret is missing", recent
        ),
    }[name]


STARTS = ["ca-near-expiry", "ca-key-garbage", "secret-deleted-while-serving"]


@pytest.mark.parametrize("name", STARTS, ids=STARTS)
def test_a_new_ca_is_staged_then_serves_then_the_old_one_leaves(name: str) -> None:
    begin = start(name)
    old_serving = begin.served
    assert old_serving is not None
    staged = step(begin.secret, at=datetime.timedelta(0), served=begin.served, known=begin.known)
    assert staged is not None
    assert begin.reason in staged.reason
    new_ca = staged.bundle.ca.cert_pem
    trace = [("staged", staged.bundle)]
    # Nothing changes before the overlap is over; a replica that restarts (nothing served,
    # nothing known) reads the same state from the Secret.
    for later, served in (
        (OVERLAP / 2, old_serving),
        (OVERLAP - datetime.timedelta(seconds=1), None),
    ):
        assert step(staged.bundle, at=later, served=served) is None
    switched = bundle_of(step(staged.bundle, at=OVERLAP))
    trace.append(("switched", switched))
    assert step(switched, at=OVERLAP * 1.5) is None
    done = bundle_of(step(switched, at=OVERLAP * 2))
    trace.append(("done", done))
    assert step(done, at=OVERLAP * 3) is None

    def issuer(serving: certificates.KeyPair) -> str:
        return (
            "new"
            if verifies(serving.cert_pem, trace[0][1].ca_bundle)
            and verifies(serving.cert_pem, base64.b64encode(new_ca).decode())
            else "old"
        )

    def cas(bundle: certificates.Bundle) -> list[str]:
        return ["new" if pem == new_ca else "old" for pem in bundle.trusted]

    assert [(label, issuer(b.serving), cas(b)) for label, b in trace] == [
        ("staged", "old", ["new", "old"]),
        ("switched", "new", ["new", "old"]),
        ("done", "new", ["new"]),
    ]


def test_a_restart_without_the_secret_serves_a_new_pair_and_keeps_the_old_ca() -> None:
    begin = start("secret-deleted-then-restart")
    first = bundle_of(step(None, at=datetime.timedelta(0), known=begin.known))
    assert (first.previous, verifies(first.serving.cert_pem, first.ca_bundle)) == (
        begin.known,
        True,
    )
    # The replicas that kept the old pair (pair_to_serve) load the new one after one overlap;
    # the old CA leaves one overlap after that.
    assert [step(first, at=at) for at in (OVERLAP / 2, OVERLAP, OVERLAP * 1.5)] == [None] * 3
    assert bundle_of(step(first, at=OVERLAP * 2)).previous == ()


@pytest.mark.parametrize(
    ("served", "at", "expected"),
    [
        pytest.param("old", OVERLAP / 2, "old", id="kept-while-the-new-ca-is-young"),
        pytest.param("old", OVERLAP, "secret", id="the-secrets-once-the-ca-is-old-enough"),
        pytest.param(None, OVERLAP / 2, "secret", id="nothing-served-yet"),
        pytest.param("stranger", OVERLAP / 2, "secret", id="not-signed-by-a-previous-ca"),
        pytest.param("old-key-garbage", OVERLAP / 2, "secret", id="unservable"),
    ],
)
def test_which_pair_a_replica_serves_while_a_new_ca_is_young(
    served: str | None, at: datetime.timedelta, expected: str
) -> None:
    begin = start("secret-deleted-then-restart")
    secret = bundle_of(step(None, at=datetime.timedelta(0), known=begin.known))
    pairs = {
        "old": begin.before.serving,
        "stranger": steady(made=T0).serving,
        "old-key-garbage": certificates.KeyPair(begin.before.serving.cert_pem, b"garbage"),
    }
    mine = pairs[served] if served else None
    chosen = certificates.pair_to_serve(secret, mine, overlap=OVERLAP, now=T0 + at)
    assert {id(secret.serving): "secret", id(mine): served}[id(chosen)] == expected


@pytest.mark.parametrize(
    ("known", "kept"),
    [
        pytest.param("nothing", 0, id="first-install"),
        pytest.param("garbage", 0, id="ca-bundle-garbage"),
        pytest.param("expired-ca", 0, id="expired-ca-not-kept"),
        pytest.param("serving-cert", 0, id="a-non-ca-certificate-not-kept"),
        pytest.param("two-cas", 2, id="every-valid-ca-kept"),
        pytest.param("same-ca-twice", 1, id="duplicates-kept-once"),
    ],
)
def test_a_lost_secret_keeps_only_valid_cas_of_the_ca_bundle(known: str, kept: int) -> None:
    one, two = steady(made=T0), steady(made=T0)
    expired = steady(made=T0 - datetime.timedelta(days=3651))
    pems = {
        "nothing": (),
        "garbage": certificates.split_pem(b"not a certificate"),
        "expired-ca": (expired.ca.cert_pem,),
        "serving-cert": (one.serving.cert_pem,),
        "two-cas": (one.ca.cert_pem, two.ca.cert_pem),
        "same-ca-twice": (one.ca.cert_pem, one.ca.cert_pem),
    }[known]
    fresh = bundle_of(step(None, at=datetime.timedelta(0), known=pems))
    assert (len(fresh.previous), verifies(fresh.serving.cert_pem, fresh.ca_bundle)) == (kept, True)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param("staged-serving-key-garbage", "issued by the new CA", id="unservable-now"),
        pytest.param("staged-serving-needs-a-name", None, id="renewal-waits-for-the-stage"),
        pytest.param("serving-by-a-stranger", "not signed by a CA of the caBundle", id="stranger"),
        pytest.param("switched-serving-near-expiry", "expires at", id="switched-renews"),
    ],
)
def test_a_serving_certificate_mid_rollover(case: str, expected: str | None) -> None:
    old = steady(made=T0 - datetime.timedelta(days=30))
    staged = bundle_of(
        step(None, at=datetime.timedelta(0), served=old.serving, known=(old.ca.cert_pem,))
    )
    switched = bundle_of(step(staged, at=OVERLAP))
    bundle, names = {
        "staged-serving-key-garbage": (
            dataclasses.replace(staged, serving=certificates.KeyPair(old.serving.cert_pem, b"x")),
            NAMES,
        ),
        "staged-serving-needs-a-name": (staged, [*NAMES, "other.svc"]),
        "serving-by-a-stranger": (
            dataclasses.replace(switched, serving=steady(made=T0).serving),
            NAMES,
        ),
        "switched-serving-near-expiry": (switched, NAMES),
    }[case]
    at = datetime.timedelta(days=300) if case == "switched-serving-near-expiry" else OVERLAP / 4
    found = certificates.next_bundle(
        bundle, dns_names=names, overlap=OVERLAP, ca_name=CA_NAME, now=T0 + at
    )
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert expected in found.reason
    # Whatever is renewed mid-rollover is signed by the new CA and keeps the old one trusted.
    assert (
        verifies(found.bundle.serving.cert_pem, base64.b64encode(bundle.ca.cert_pem).decode()),
        found.bundle.previous,
    ) == (True, bundle.previous)


# -- the simulation ---------------------------------------------------------------------------


@dataclasses.dataclass
class Replica:
    offset: float
    """Seconds after T0 of its first check (replicas check out of step)."""
    served: certificates.KeyPair
    delay: float = 0.0
    """Seconds each check runs late (a loaded node)."""

    def checks(self, until: float) -> list[float]:
        times, at = [], self.offset
        while at <= until:
            times.append(at)
            at += INTERVAL + self.delay
        return times


@pytest.mark.parametrize("lag", [0.0, 5.0, 20.0], ids=["fresh", "lag-5s", "lag-20s"])
@pytest.mark.parametrize("name", [*STARTS, "secret-deleted-then-restart"])
def test_no_replica_ever_serves_a_certificate_the_ca_bundle_does_not_verify(
    name: str, lag: float
) -> None:
    """Three replicas check every INTERVAL, out of step (one late by 3 s every time); each
    check steps the Secret, writes its caBundle and loads its pair, as SecretSource does.
    kube-apiserver calls with the caBundle written ``lag`` seconds before; every half second,
    every replica's certificate must verify against it.

    In ``secret-deleted-then-restart`` replica 0 restarts without the Secret: it has no pair
    but a new one, which kube-apiserver trusts only once it holds the new caBundle; the other
    replicas must stay trusted throughout."""
    begin = start(name)
    served = begin.before.serving
    ca_bundle = begin.before.ca_bundle
    replicas = [Replica(0.0, served), Replica(3.3, served), Replica(6.6, served, delay=3.0)]
    restarted = {0} if begin.served is None else set()
    fresh_start = set(restarted)
    secret = begin.secret
    horizon = 4 * OVERLAP.total_seconds()
    written: list[tuple[float, str]] = [(-horizon, ca_bundle)]
    checks = [(at, i) for i, r in enumerate(replicas) for at in r.checks(horizon)]
    ticks = [(tick / 2, -1) for tick in range(int(horizon * 2))]
    failures: list[str] = []
    for at, index in sorted(checks + ticks):
        if index >= 0:
            replica = replicas[index]
            found = certificates.next_bundle(
                secret,
                dns_names=NAMES,
                overlap=OVERLAP,
                ca_name=CA_NAME,
                served=None if index in restarted else replica.served,
                known_cas=certificates.split_pem(base64.b64decode(written[-1][1])),
                now=T0 + datetime.timedelta(seconds=at),
            )
            restarted.discard(index)
            secret = found.bundle if found is not None else secret
            assert secret is not None
            if written[-1][1] != secret.ca_bundle:
                written.append((at, secret.ca_bundle))
            replica.served = certificates.pair_to_serve(
                secret,
                None if index in fresh_start else replica.served,
                overlap=OVERLAP,
                now=T0 + datetime.timedelta(seconds=at),
            )
            fresh_start.discard(index)
            continue
        held = [bundle for when, bundle in written if when <= at - lag][-1]
        failures += [
            f"t={at:.1f}s replica {i}"
            for i, r in enumerate(replicas)
            if not verifies(r.served.cert_pem, held) and not (begin.served is None and i == 0)
        ]
    # The rollover ends with one CA, the one that signed what every replica serves.
    assert secret is not None
    assert (
        failures,
        len(certificates.split_pem(base64.b64decode(secret.ca_bundle))),
        all(verifies(r.served.cert_pem, secret.ca_bundle) for r in replicas),
    ) == ([], 1, True)
