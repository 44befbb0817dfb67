"""kubesim.certs: the CA and serving certificates that admission webhooks are verified with."""

from __future__ import annotations

import base64
import ipaddress
import pathlib
import stat
from typing import Any, NamedTuple

import pytest
from cryptography import x509

from kubesim import certs


@pytest.fixture(scope="module")
def ca() -> certs.CertificateAuthority:
    return certs.generate_ca()


def test_a_serving_certificate_names_every_way_to_reach_the_service(
    ca: certs.CertificateAuthority,
) -> None:
    pair = certs.issue_serving_certificate(
        ca, service="hooks", namespace="queuetree-system", extra_dns_names=("localhost",)
    )
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value

    assert (sans.get_values_for_type(x509.DNSName), sans.get_values_for_type(x509.IPAddress)) == (
        [
            "hooks",
            "hooks.queuetree-system",
            "hooks.queuetree-system.svc",
            "hooks.queuetree-system.svc.cluster.local",
            "localhost",
        ],
        [ipaddress.ip_address("127.0.0.1")],
    )
    assert cert.issuer == x509.load_pem_x509_certificate(ca.cert_pem).subject


def test_the_ca_is_a_ca_and_its_bundle_is_base64_pem(ca: certs.CertificateAuthority) -> None:
    cert = x509.load_pem_x509_certificate(ca.cert_pem)
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert (constraints.ca, base64.b64decode(ca.ca_bundle)) == (True, ca.cert_pem)


def test_a_client_context_checks_names_by_san_only(ca: certs.CertificateAuthority) -> None:
    context = certs.client_ssl_context(ca.ca_bundle)
    assert (context.check_hostname, context.hostname_checks_common_name) == (True, False)


class BadBundleCase(NamedTuple):
    bundle: Any
    prefix: Any


BAD_BUNDLE_CASES = {
    "not base64": BadBundleCase(bundle="%%%", prefix="caBundle: not base64-encoded PEM: "),
    "base64 of no certificate": BadBundleCase(
        bundle=base64.b64encode(b"hello").decode(),
        prefix="caBundle: holds no usable PEM certificate: ",
    ),
}


@pytest.mark.parametrize(
    ("bundle", "prefix"), BAD_BUNDLE_CASES.values(), ids=BAD_BUNDLE_CASES.keys()
)
def test_a_bad_ca_bundle_is_an_error_naming_the_field(bundle: str, prefix: str) -> None:
    with pytest.raises(ValueError) as caught:
        certs.client_ssl_context(bundle)
    assert str(caught.value).startswith(prefix)


def test_a_key_pair_is_written_as_a_tls_secret_would_hold_it(
    ca: certs.CertificateAuthority, tmp_path: pathlib.Path
) -> None:
    pair = certs.issue_serving_certificate(ca, service="hooks", namespace="ns")

    cert_path, key_path = certs.write_key_pair(pair, tmp_path / "tls")

    assert (cert_path.name, cert_path.read_bytes(), key_path.name, key_path.read_bytes()) == (
        "tls.crt",
        pair.cert_pem,
        "tls.key",
        pair.key_pem,
    )
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
