"""Serving certificates: generation, renewal decisions, TLS 1.2+ only, rotation from files."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import pathlib
import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509

from queuetree.webhooks import certificates, server, settings
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


@pytest.fixture
async def tls_server(tmp_path: pathlib.Path) -> AsyncIterator[tuple[int, ssl.SSLContext]]:
    """The webhook app on 127.0.0.1 over TLS (files mode), with the context it serves."""
    bundle = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    (tmp_path / "ca.crt").write_bytes(bundle.ca.cert_pem)
    source = certificates.FileSource(*write_pair(tmp_path, bundle.serving))
    context = certificates.server_context()
    source.refresh(context)
    app = server.build_app(source=server.StaticSource(), settings=settings.ReviewSettings())
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield port, context
    await runner.cleanup()


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.hostname_checks_common_name = False
    return context


async def peer_serial(port: int, context: ssl.SSLContext) -> int:
    """Handshake with the server as kube-apiserver does (by the Service's name); the serial of
    the certificate it served."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=HOST)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    with contextlib.suppress(ssl.SSLError, ConnectionError):
        await writer.wait_closed()
    return x509.load_der_x509_certificate(der).serial_number


async def test_the_server_speaks_tls_verified_by_the_service_name(
    tls_server: tuple[int, ssl.SSLContext], tmp_path: pathlib.Path
) -> None:
    port, _ = tls_server
    trusted = client_context((tmp_path / "ca.crt").read_bytes())
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"https://127.0.0.1:{port}/queues/mutate",
            json=review("CREATE", {"metadata": {"name": "a"}, "spec": {}}),
            ssl=trusted,
            server_hostname=HOST,
        ) as response,
    ):
        answered = await response.json()
    assert (response.status, answered["response"]["allowed"]) == (200, True)


async def test_the_minimum_tls_version_is_enforced_by_the_server(
    tls_server: tuple[int, ssl.SSLContext], tmp_path: pathlib.Path
) -> None:
    port, context = tls_server
    tls12 = client_context((tmp_path / "ca.crt").read_bytes())
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    default_minimum = context.minimum_version
    accepted_at_1_2 = await peer_serial(port, tls12) > 0
    context.minimum_version = certificates.server_context("VersionTLS13").minimum_version
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        await peer_serial(port, tls12)
    assert (default_minimum, accepted_at_1_2) == (ssl.TLSVersion.TLSv1_2, True)


async def test_rotated_files_are_served_to_new_connections(
    tls_server: tuple[int, ssl.SSLContext], tmp_path: pathlib.Path
) -> None:
    port, context = tls_server
    trusted = client_context((tmp_path / "ca.crt").read_bytes())
    before = await peer_serial(port, trusted)
    # The rotated pair comes from a new CA, trusted alongside the first.
    rotated = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    source = certificates.FileSource(*write_pair(tmp_path, rotated.serving))
    assert source.refresh(context) is True
    both = client_context((tmp_path / "ca.crt").read_bytes() + rotated.ca.cert_pem)
    after = await peer_serial(port, both)
    rotated_serial = x509.load_pem_x509_certificate(rotated.serving.cert_pem).serial_number
    assert (after != before, after) == (True, rotated_serial)


def test_a_half_written_rotation_keeps_the_previous_pair(tmp_path: pathlib.Path) -> None:
    first = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    second = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
    source = certificates.FileSource(*write_pair(tmp_path, first.serving))
    context = certificates.server_context()
    assert source.refresh(context) is True
    (tmp_path / "tls.crt").write_bytes(second.serving.cert_pem)  # key not written yet
    assert (source.refresh(context), source.refresh(context)) == (False, False)
    (tmp_path / "tls.key").write_bytes(second.serving.key_pem)
    assert source.refresh(context) is True


def test_unreadable_files_name_the_file(tmp_path: pathlib.Path) -> None:
    source = certificates.FileSource(str(tmp_path / "missing.crt"), str(tmp_path / "k"))
    with pytest.raises(certificates.CertificateError, match=r"missing\.crt"):
        source.refresh(certificates.server_context())


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


SANS = {
    "an IPv4 address": (("10.0.0.1",), ([], ("10.0.0.1",))),
    "an IPv6 address, normalised": (("0:0::1",), ([], ("::1",))),
    "a DNS name": (("webhook.example.com",), (["webhook.example.com"], ())),
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
