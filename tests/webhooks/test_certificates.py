"""Serving certificates: generation, renewal decisions, TLS 1.2+ only, rotation from files."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import pathlib
import ssl
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from queuetree.webhooks import certificates, listening, server, settings
from tests.webhooks.builders import review

SERVICE, NAMESPACE = "queuetree-webhook", "queuetree-system"
NAMES = certificates.service_dns_names(SERVICE, NAMESPACE)
HOST = f"{SERVICE}.{NAMESPACE}.svc"


def test_a_generated_bundle_covers_every_service_name_and_needs_no_renewal() -> None:
    bundle = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    cert = x509.load_pem_x509_certificate(bundle.serving.cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert (
        sans.get_values_for_type(x509.DNSName),
        certificates.renewal_reason(bundle, dns_names=NAMES),
    ) == (
        [
            "queuetree-webhook",
            "queuetree-webhook.queuetree-system",
            "queuetree-webhook.queuetree-system.svc",
            "queuetree-webhook.queuetree-system.svc.cluster.local",
        ],
        None,
    )


@pytest.mark.parametrize(
    ("days_later", "names", "expected"),
    [
        pytest.param(0, NAMES, None, id="fresh"),
        pytest.param(300, NAMES, "the serving certificate expires at", id="serving-near-expiry"),
        pytest.param(
            0, [*NAMES, "other.svc"], "the serving certificate lacks other.svc", id="new-name"
        ),
    ],
)
def test_renewal_is_decided_by_lifetime_and_names(
    days_later: int, names: list[str], expected: str | None
) -> None:
    bundle = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    now = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=days_later)
    reason = certificates.renewal_reason(bundle, dns_names=names, now=now)
    assert (reason is None, (reason or "").startswith(expected or "")) == (expected is None, True)


def test_a_serving_certificate_of_another_ca_is_renewed() -> None:
    ours = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    theirs = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    mixed = certificates.Bundle(ca=ours.ca, serving=theirs.serving)
    assert certificates.renewal_reason(mixed, dns_names=NAMES) == (
        "the serving certificate is not signed by the CA"
    )


def write_pair(directory: pathlib.Path, pair: certificates.KeyPair) -> tuple[str, str]:
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)
    return str(directory / "tls.crt"), str(directory / "tls.key")


@dataclasses.dataclass
class TLSServer:
    port: int
    serving: certificates.ServingContext
    files: certificates.FileSource
    directory: pathlib.Path
    first: certificates.Bundle


@pytest.fixture
async def tls_server(tmp_path: pathlib.Path) -> AsyncIterator[TLSServer]:
    """The webhook app on 127.0.0.1 over TLS (files mode), served as ``queuetree webhook``
    serves it."""
    bundle = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    (tmp_path / "ca.crt").write_bytes(bundle.ca.cert_pem)
    files = certificates.FileSource(*write_pair(tmp_path, bundle.serving))
    serving = certificates.ServingContext(certificates.server_context)
    files.refresh(serving)
    app = server.build_app(source=server.StaticSource(), settings=settings.ReviewSettings())
    async with listening.listening(
        app,
        sock=listening.bind("127.0.0.1", 0),
        context=serving.context,
        limits=listening.Limits(),
    ) as port:
        yield TLSServer(port, serving, files, tmp_path, bundle)


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.hostname_checks_common_name = False
    return context


async def peer_certificate(
    port: int, context: ssl.SSLContext, *, server_hostname: str | None = HOST
) -> x509.Certificate:
    """Handshake with the server as kube-apiserver does (by the Service's name, or without
    SNI); the certificate it served."""
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=server_hostname
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    with contextlib.suppress(ssl.SSLError, ConnectionError):
        await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


async def peer_serial(port: int, context: ssl.SSLContext) -> int:
    return (await peer_certificate(port, context)).serial_number


def serial_of(pair: certificates.KeyPair) -> int:
    return x509.load_pem_x509_certificate(pair.cert_pem).serial_number


def issue_rsa(ca: certificates.KeyPair) -> certificates.KeyPair:
    """A serving certificate with an RSA key, signed by ``ca`` (which signs ECDSA ones too)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, HOST)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in NAMES]), False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificates.KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem)


async def test_the_server_speaks_tls_verified_by_the_service_name(
    tls_server: TLSServer,
) -> None:
    trusted = client_context(tls_server.first.ca.cert_pem)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"https://127.0.0.1:{tls_server.port}/queues/mutate",
            json=review("CREATE", {"metadata": {"name": "a"}, "spec": {}}),
            ssl=trusted,
            server_hostname=HOST,
        ) as response,
    ):
        answered = await response.json()
    assert (response.status, answered["response"]["allowed"]) == (200, True)


async def test_the_minimum_tls_version_is_enforced_by_the_server(tls_server: TLSServer) -> None:
    context = tls_server.serving.context
    tls12 = client_context(tls_server.first.ca.cert_pem)
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    default_minimum = context.minimum_version
    accepted_at_1_2 = await peer_serial(tls_server.port, tls12) > 0
    context.minimum_version = certificates.server_context("VersionTLS13").minimum_version
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        await peer_serial(tls_server.port, tls12)
    assert (default_minimum, accepted_at_1_2) == (ssl.TLSVersion.TLSv1_2, True)


def test_tls_1_2_offers_only_aead_suites_with_forward_secrecy() -> None:
    suites = certificates.server_context().get_ciphers()
    tls12 = [c for c in suites if c["protocol"] == "TLSv1.2"]
    assert (
        bool(tls12),
        [c["name"] for c in tls12 if not c["aead"] or c["kea"] != "kx-ecdhe"],
    ) == (True, [])


async def test_a_client_that_only_speaks_cbc_suites_is_refused(tls_server: TLSServer) -> None:
    cbc = client_context(tls_server.first.ca.cert_pem)
    cbc.maximum_version = ssl.TLSVersion.TLSv1_2
    cbc.set_ciphers("ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA")
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        await peer_serial(tls_server.port, cbc)


async def test_rotated_files_are_served_to_new_connections(tls_server: TLSServer) -> None:
    trusted = client_context(tls_server.first.ca.cert_pem)
    before = await peer_serial(tls_server.port, trusted)
    # The rotated pair comes from a new CA, trusted alongside the first.
    rotated = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    write_pair(tls_server.directory, rotated.serving)
    assert tls_server.files.refresh(tls_server.serving) is True
    both = client_context(tls_server.first.ca.cert_pem + rotated.ca.cert_pem)
    after = await peer_serial(tls_server.port, both)
    assert (after != before, after) == (True, serial_of(rotated.serving))


async def test_a_certificate_copied_before_its_key_keeps_the_old_pair_serving(
    tls_server: TLSServer, caplog: pytest.LogCaptureFixture
) -> None:
    trusted = client_context(tls_server.first.ca.cert_pem)
    second = certificates.issue_serving(tls_server.first.ca, dns_names=NAMES)
    (tls_server.directory / "tls.crt").write_bytes(second.cert_pem)  # the key is not there yet
    with caplog.at_level(logging.WARNING, logger="queuetree.webhooks.certificates"):
        refreshed = tls_server.files.refresh(tls_server.serving)
        again = tls_server.files.refresh(tls_server.serving)
    during = await peer_serial(tls_server.port, trusted)
    (tls_server.directory / "tls.key").write_bytes(second.key_pem)
    completed = tls_server.files.refresh(tls_server.serving)
    after = await peer_serial(tls_server.port, trusted)
    warnings = [r.getMessage() for r in caplog.records]
    assert (refreshed, again, during, completed, after, len(warnings)) == (
        False,
        False,
        serial_of(tls_server.first.serving),
        True,
        serial_of(second),
        1,
    )
    assert "certificate and key do not match" in warnings[0]
    assert "the previous pair still is" in warnings[0]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param(
            lambda pair: certificates.KeyPair(
                pair.cert_pem[: len(pair.cert_pem) // 2], pair.key_pem
            ),
            "the certificate does not parse",
            id="certificate-half-written",
        ),
        pytest.param(
            lambda pair: certificates.KeyPair(pair.cert_pem, b""),
            "the private key does not parse",
            id="empty-key",
        ),
    ],
)
async def test_a_partial_pair_keeps_the_old_pair_serving_and_says_why(
    tls_server: TLSServer,
    caplog: pytest.LogCaptureFixture,
    damage: Any,
    reason: str,
) -> None:
    trusted = client_context(tls_server.first.ca.cert_pem)
    second = certificates.issue_serving(tls_server.first.ca, dns_names=NAMES)
    write_pair(tls_server.directory, damage(second))
    with caplog.at_level(logging.WARNING, logger="queuetree.webhooks.certificates"):
        refreshed = tls_server.files.refresh(tls_server.serving)
    served = await peer_serial(tls_server.port, trusted)
    assert (refreshed, served, reason in caplog.text) == (
        False,
        serial_of(tls_server.first.serving),
        True,
    )


async def test_a_change_of_key_type_is_what_clients_receive(tls_server: TLSServer) -> None:
    trusted = client_context(tls_server.first.ca.cert_pem)
    before = await peer_certificate(tls_server.port, trusted)
    rsa_pair = issue_rsa(tls_server.first.ca)
    write_pair(tls_server.directory, rsa_pair)
    assert tls_server.files.refresh(tls_server.serving) is True
    after_rsa = await peer_certificate(tls_server.port, trusted)
    back = certificates.issue_serving(tls_server.first.ca, dns_names=NAMES)
    write_pair(tls_server.directory, back)
    assert tls_server.files.refresh(tls_server.serving) is True
    after_ecdsa = await peer_certificate(tls_server.port, trusted)
    assert (
        type(before.public_key()).__name__,
        after_rsa.serial_number,
        type(after_rsa.public_key()).__name__,
        after_ecdsa.serial_number,
    ) == (
        type(ec.generate_private_key(ec.SECP256R1()).public_key()).__name__,
        serial_of(rsa_pair),
        type(rsa.generate_private_key(65537, 2048).public_key()).__name__,
        serial_of(back),
    )


async def test_a_client_without_server_name_gets_the_current_certificate(
    tls_server: TLSServer,
) -> None:
    no_sni = ssl.create_default_context(cadata=tls_server.first.ca.cert_pem.decode())
    no_sni.check_hostname = False
    second = certificates.issue_serving(tls_server.first.ca, dns_names=NAMES)
    write_pair(tls_server.directory, second)
    tls_server.files.refresh(tls_server.serving)
    served = await peer_certificate(tls_server.port, no_sni, server_hostname=None)
    assert served.serial_number == serial_of(second)


def test_a_first_pair_that_does_not_match_is_an_error_naming_the_files(
    tmp_path: pathlib.Path,
) -> None:
    first = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    other = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    write_pair(tmp_path, certificates.KeyPair(first.serving.cert_pem, other.serving.key_pem))
    source = certificates.FileSource(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    with pytest.raises(certificates.CertificateError) as raised:
        source.refresh(certificates.ServingContext(certificates.server_context))
    assert (
        str(tmp_path / "tls.crt") in str(raised.value),
        "do not match" in str(raised.value),
    ) == (
        True,
        True,
    )


def test_unreadable_files_name_the_file(tmp_path: pathlib.Path) -> None:
    source = certificates.FileSource(str(tmp_path / "missing.crt"), str(tmp_path / "k"))
    with pytest.raises(certificates.CertificateError, match=r"missing\.crt"):
        source.refresh(certificates.ServingContext(certificates.server_context))


@pytest.mark.parametrize(
    ("years_later", "garbage", "expected"),
    [
        pytest.param(0, False, None, id="fresh"),
        pytest.param(8, False, "the CA expires at", id="last-quarter-of-its-life"),
        pytest.param(0, True, "unreadable CA certificate or key", id="garbage"),
    ],
)
def test_the_ca_is_kept_until_the_last_quarter_of_its_life(
    years_later: int, garbage: bool, expected: str | None
) -> None:
    ca = certificates.generate_ca(common_name="test-ca")
    if garbage:
        ca = certificates.KeyPair(b"not a certificate", ca.key_pem)
    now = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=365 * years_later)
    problem = certificates.ca_problem(ca, now=now)
    assert (problem is None, (problem or "").startswith(expected or "")) == (
        expected is None,
        True,
    )


def test_extra_sans_add_ip_addresses_and_names_that_renewal_then_requires() -> None:
    extra = ("127.0.0.1", "::1", "webhook.local")
    bundle = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE, extra_sans=extra)
    sans = (
        x509.load_pem_x509_certificate(bundle.serving.cert_pem)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    plain = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    assert (
        [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)],
        sans.get_values_for_type(x509.DNSName)[-1],
        certificates.renewal_reason(
            bundle, dns_names=[*NAMES, "webhook.local"], ip_addresses=("127.0.0.1", "::1")
        ),
        certificates.renewal_reason(plain, dns_names=NAMES, ip_addresses=("127.0.0.1",)),
    ) == (
        ["127.0.0.1", "::1"],
        "webhook.local",
        None,
        "the serving certificate lacks 127.0.0.1",
    )


class SansCase(NamedTuple):
    sans: Any
    expected: Any


SANS = {
    "an IPv4 address": SansCase(sans=("10.0.0.1",), expected=([], ("10.0.0.1",))),
    "an IPv6 address, normalised": SansCase(sans=("0:0::1",), expected=([], ("::1",))),
    "a DNS name": SansCase(sans=("webhook.example.com",), expected=(["webhook.example.com"], ())),
}


@pytest.mark.parametrize(("sans", "expected"), list(SANS.values()), ids=list(SANS))
def test_extra_sans_split_into_names_and_addresses(
    sans: tuple[str, ...], expected: tuple[list[str], tuple[str, ...]]
) -> None:
    assert certificates.split_sans(sans) == expected


@pytest.mark.parametrize(
    "bad", ["", "https://x", "a b", "x" * 254], ids=["empty", "url", "space", "long"]
)
def test_an_extra_san_that_is_neither_is_refused_by_name(bad: str) -> None:
    with pytest.raises(ValueError, match="is neither an IP address nor a DNS name"):
        certificates.split_sans((bad,))
