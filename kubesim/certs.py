"""Certificates for admission webhooks served over real TLS in tests and the sandbox.

kube-apiserver calls a webhook over HTTPS and verifies the serving certificate against the
`caBundle` of the webhook configuration, by its subject alternative names only (Go ignores the
common name). This module makes the two pieces a test needs, with `cryptography`:

- a self-signed certificate authority (`generate_ca`), whose PEM, base64-encoded, is the
  `caBundle`;
- a serving certificate for a Service (`issue_serving_certificate`), with the SANs a client may
  use to reach it: `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local` and
  the IP `127.0.0.1` (plus any extra names or addresses).

Keys are ECDSA P-256: generating one takes a millisecond, where RSA-2048 takes tens, and Go,
OpenSSL and kubectl all accept them. Neighbours: `kubesim.admission` trusts `caBundle`s made
here; the webhook server under test loads the pair with `server_ssl_context`.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import ipaddress
import os
import pathlib
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import oid

DEFAULT_VALIDITY = datetime.timedelta(days=365)
"""How long certificates are valid by default: long enough for any test run or sandbox."""

_BACKDATE = datetime.timedelta(minutes=5)
"""Certificates start a little in the past, so a clock skew between processes never makes a
fresh certificate "not yet valid"."""


@dataclasses.dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """A CA that signs serving certificates. `cert_pem` is what a `caBundle` carries."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_bundle(self) -> str:
        """The CA certificate as `webhooks[*].clientConfig.caBundle` wants it: base64 of PEM."""
        return base64.b64encode(self.cert_pem).decode("ascii")


@dataclasses.dataclass(frozen=True, slots=True)
class KeyPair:
    """A serving certificate (PEM; the leaf only) and its private key (PKCS#8 PEM)."""

    cert_pem: bytes
    key_pem: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def generate_ca(
    common_name: str = "kubesim-webhook-ca",
    *,
    validity: datetime.timedelta = DEFAULT_VALIDITY,
) -> CertificateAuthority:
    """Create a self-signed CA valid from a few minutes ago for `validity`."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM), key_pem=_key_pem(key)
    )


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The DNS names by which in-cluster clients reach a Service, shortest first."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def issue_serving_certificate(
    ca: CertificateAuthority,
    *,
    service: str,
    namespace: str,
    extra_dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = ("127.0.0.1",),
    validity: datetime.timedelta = DEFAULT_VALIDITY,
) -> KeyPair:
    """Sign a serving certificate for the Service `<service>.<namespace>`.

    The SANs are `service_dns_names(service, namespace)`, then `extra_dns_names`, then
    `ip_addresses` as IP SANs. The common name is `<service>.<namespace>.svc`, for people
    reading the certificate; verifiers use the SANs.
    """
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"CA key: expected an ECDSA key, got {type(ca_key).__name__}")
    key = _new_key()
    sans: list[x509.GeneralName] = [
        x509.DNSName(n) for n in [*service_dns_names(service, namespace), *extra_dns_names]
    ]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, f"{service}.{namespace}.svc")])
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert_pem=cert.public_bytes(serialization.Encoding.PEM), key_pem=_key_pem(key))


def write_key_pair(pair: KeyPair, directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """Write `tls.crt` and `tls.key` (the names of a kubernetes.io/tls Secret) into `directory`.

    Returns the two paths. The key file is created readable by its owner only.
    """
    directory.mkdir(parents=True, exist_ok=True)
    cert_path = directory / "tls.crt"
    key_path = directory / "tls.key"
    cert_path.write_bytes(pair.cert_pem)
    descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        os.fchmod(stream.fileno(), 0o600)  # an existing file keeps its old mode otherwise
        stream.write(pair.key_pem)
    return cert_path, key_path


def server_ssl_context(pair: KeyPair) -> ssl.SSLContext:
    """A server-side TLS context serving `pair` (for aiohttp's `web.TCPSite(ssl_context=...)`).

    `ssl` loads certificates only from files, so the pair goes through a private temporary
    directory that is removed before returning.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory(prefix="kubesim-tls-") as tmp:
        cert_path, key_path = write_key_pair(pair, pathlib.Path(tmp))
        context.load_cert_chain(cert_path, key_path)
    return context


def client_ssl_context(ca_bundle: str | bytes) -> ssl.SSLContext:
    """A client TLS context trusting only the CA(s) of a `caBundle` (base64 of PEM).

    Like Go's verifier, it checks the server's SANs and never falls back to the common name.
    Raises ValueError naming the bundle when it is not base64 or holds no PEM certificate.
    """
    try:
        pem = base64.b64decode(ca_bundle, validate=True).decode("ascii")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"caBundle: not base64-encoded PEM: {exc}") from exc
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.hostname_checks_common_name = False
    try:
        context.load_verify_locations(cadata=pem)
    except ssl.SSLError as exc:
        raise ValueError(f"caBundle: holds no usable PEM certificate: {exc}") from exc
    return context
