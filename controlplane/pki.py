"""The control plane's certificates and keys, as kube-apiserver's flags name them.

One CA signs the apiserver's serving certificate and the client certificates (the admin's, with
``O=system:masters``, and the components'); a separate RSA pair signs service-account tokens.
Keys are ECDSA P-256 except the service-account pair (RSA, the key type every token verifier
accepts). Files are written with mode 0600.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509 import oid

VALIDITY = datetime.timedelta(days=30)
BACKDATE = datetime.timedelta(hours=1)
"""Certificates start an hour early, so a clock a little behind still accepts them."""

APISERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
APISERVER_IPS = ("127.0.0.1", "::1", "10.96.0.1")
"""Loopback, and the first address of the service range (the ``kubernetes`` Service)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Files:
    """Where :func:`write` put everything."""

    directory: pathlib.Path

    @property
    def ca_cert(self) -> pathlib.Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> pathlib.Path:
        return self.directory / "ca.key"

    @property
    def apiserver_cert(self) -> pathlib.Path:
        return self.directory / "apiserver.crt"

    @property
    def apiserver_key(self) -> pathlib.Path:
        return self.directory / "apiserver.key"

    @property
    def sa_key(self) -> pathlib.Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> pathlib.Path:
        return self.directory / "sa.pub"

    def client_cert(self, name: str) -> pathlib.Path:
        return self.directory / f"{name}.crt"

    def client_key(self, name: str) -> pathlib.Path:
        return self.directory / f"{name}.key"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: pathlib.Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(oid.NameOID.COMMON_NAME, common_name)]
    attributes += [x509.NameAttribute(oid.NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name(attributes)


def _usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _issue(
    *,
    ca_key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    usages: list[x509.ObjectIdentifier],
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
) -> x509.Certificate:
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def write(directory: pathlib.Path, *, clients: dict[str, tuple[str, ...]]) -> Files:
    """A CA, the apiserver's serving pair, one client pair per ``clients`` entry (file name ->
    (common name, organizations...)) and the service-account signing pair, in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    files = Files(directory)
    now = _now()
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("queuetree-controlplane-ca")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(ca=True), critical=True)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(files.ca_cert, ca.public_bytes(serialization.Encoding.PEM))
    _write(files.ca_key, _pem_key(ca_key))

    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _issue(
        ca_key=ca_key,
        issuer=ca_name,
        subject=_name("kube-apiserver"),
        key=serving_key,
        usages=[oid.ExtendedKeyUsageOID.SERVER_AUTH],
        dns_names=APISERVER_NAMES,
        ip_addresses=APISERVER_IPS,
    )
    _write(files.apiserver_cert, serving.public_bytes(serialization.Encoding.PEM))
    _write(files.apiserver_key, _pem_key(serving_key))

    for file_name, (common_name, *organizations) in clients.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(
            ca_key=ca_key,
            issuer=ca_name,
            subject=_name(common_name, tuple(organizations)),
            key=key,
            usages=[oid.ExtendedKeyUsageOID.CLIENT_AUTH],
        )
        _write(files.client_cert(file_name), cert.public_bytes(serialization.Encoding.PEM))
        _write(files.client_key(file_name), _pem_key(key))

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(files.sa_key, _pem_key(sa_key))
    _write(
        files.sa_pub,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return files


def serving_pair(
    files: Files,
    directory: pathlib.Path,
    *,
    common_name: str,
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = ("127.0.0.1",),
) -> tuple[pathlib.Path, pathlib.Path]:
    """A serving certificate signed by the control plane's CA, as ``directory/tls.crt`` and
    ``directory/tls.key`` (controller-runtime's names), for a local webhook server that the API
    server calls by address: the CA is ``files.ca_cert``, its caBundle."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(
        ca_key=ca_key,
        issuer=ca.subject,
        subject=_name(common_name),
        key=key,
        usages=[oid.ExtendedKeyUsageOID.SERVER_AUTH],
        dns_names=dns_names,
        ip_addresses=ip_addresses,
    )
    crt, pem = directory / "tls.crt", directory / "tls.key"
    _write(crt, cert.public_bytes(serialization.Encoding.PEM))
    _write(pem, _pem_key(key))
    return crt, pem
