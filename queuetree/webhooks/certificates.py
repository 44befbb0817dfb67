"""Serving certificates for the webhook: from files, self-managed, or read from a Secret.

kube-apiserver calls the webhook over HTTPS and trusts only the ``caBundle`` of the webhook
configuration, checking the serving certificate's subject alternative names. Three sources:

- ``files``: ``--tls-cert-file`` and ``--tls-private-key-file`` (a mounted Secret, for
  example); the files are re-read when they change, so a rotated certificate is served without
  a restart (new handshakes use it; open connections keep theirs).
- ``self-managed``: the webhook makes its own CA and serving certificate with ``cryptography``,
  keeps them in a Secret (so every replica serves the same pair) and writes the CA into the
  ``caBundle`` of its Mutating and Validating webhook configurations. Replicas race safely: the
  Secret is created with ``create`` (a 409 means another replica won: read and use theirs) and
  renewed with ``replace`` carrying the ``resourceVersion`` read (a 409 means someone renewed
  first: read again); every replica then writes the same ``caBundle``, which is idempotent.
- ``cert-manager``: read the Secret cert-manager writes (``tls.crt``, ``tls.key``), never write
  it nor the ``caBundle`` (cert-manager's cainjector does that).

Keys are ECDSA P-256 (fast to make; accepted by Go, OpenSSL and kubectl). The CA is valid for
ten years, the serving certificate for one; both are renewed when less than a quarter of their
lifetime remains, or when the serving certificate does not cover the Service's DNS names. A
serving certificate is renewed with the same CA while the CA lasts, so the caBundle does not
change and no replica serves a certificate kube-apiserver would not trust.

A new CA (the old one near expiry, unreadable, or the Secret lost) is rolled over in three
steps (:func:`next_bundle`), so that at every moment the caBundle kube-apiserver holds, even one
a little stale, verifies the certificate every replica serves:

1. *staged*: the new CA enters the caBundle beside the old one; every replica keeps serving the
   certificate the old CA signed;
2. *switched*, one :func:`overlap` later: the serving certificate is issued by the new CA; the
   old CA stays in the caBundle while the replicas load it;
3. *done*, one :func:`overlap` after the switch: the old CA leaves the caBundle.

The whole state is in the Secret (``ca-previous.crt`` holds the CAs kept for the overlap, and
each step's start is the ``notBefore`` of the certificate it made), so a replica that restarts
mid-rollover goes on from where the Secret is.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import logging
import os
import pathlib
import ssl
import tempfile
from collections.abc import Callable
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import oid

from queuetree.api import bodies, calls, paths

logger = logging.getLogger(__name__)

CA_VALIDITY = datetime.timedelta(days=3650)
SERVING_VALIDITY = datetime.timedelta(days=365)
BACKDATE = datetime.timedelta(minutes=5)
"""Certificates start a little in the past so clock skew never makes them "not yet valid"."""

CA_CERT_KEY, CA_KEY_KEY = "ca.crt", "ca.key"
TLS_CERT_KEY, TLS_KEY_KEY = "tls.crt", "tls.key"
CA_PREVIOUS_KEY = "ca-previous.crt"
"""The Secret key of the CAs (PEM, concatenated) kept in the caBundle during a rollover."""

CA_OVERLAP_CHECKS = 6
"""How long each step of a CA rollover lasts, in ``--cert-check-interval`` periods (60 s by
default). Within one period every replica writes the caBundle and loads the Secret's pair;
the rest covers kube-apiserver applying a changed webhook configuration (its informer, well
under a second when healthy) and replicas whose check runs late on a loaded node."""


@dataclasses.dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate (PEM) and its private key (PKCS#8 PEM)."""

    cert_pem: bytes
    key_pem: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Bundle:
    """What a self-managed Secret holds: the CA pair (which signs new serving certificates),
    the serving pair, and during a rollover the ``previous`` CA certificates (PEM) that stay
    trusted."""

    ca: KeyPair
    serving: KeyPair
    previous: tuple[bytes, ...] = ()

    @property
    def trusted(self) -> tuple[bytes, ...]:
        """Every CA certificate of the caBundle, the signing CA first."""
        return (self.ca.cert_pem, *self.previous)

    @property
    def ca_bundle(self) -> str:
        """The ``caBundle`` value: base64 of the trusted CA certificates' PEM."""
        return base64.b64encode(b"".join(self.trusted)).decode("ascii")


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names kube-apiserver may use for a Service, shortest first."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def split_sans(sans: tuple[str, ...]) -> tuple[list[str], tuple[str, ...]]:
    """``--cert-extra-sans`` entries as (DNS names, IP addresses); ValueError names a bad one.

    An entry that parses as an IPv4 or IPv6 address is an IP SAN, anything else a DNS name
    (kubeadm's ``--apiserver-cert-extra-sans`` reads the same way)."""
    import ipaddress

    names: list[str] = []
    ips: list[str] = []
    for san in sans:
        try:
            ips.append(str(ipaddress.ip_address(san)))
        except ValueError:
            if not san or any(c in san for c in " /:@,") or len(san) > 253:
                raise ValueError(f"{san!r} is neither an IP address nor a DNS name") from None
            names.append(san)
    return names, tuple(ips)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _usage(*, sign_certs: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=sign_certs,
        crl_sign=sign_certs,
        encipher_only=False,
        decipher_only=False,
    )


def generate_ca(*, common_name: str, now: datetime.datetime | None = None) -> KeyPair:
    """A self-signed CA for signing serving certificates."""
    now = now or _now()
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(sign_certs=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_serving(
    ca: KeyPair,
    *,
    dns_names: list[str],
    ip_addresses: tuple[str, ...] = (),
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A serving certificate for ``dns_names`` (SANs; the first is also the common name)."""
    import ipaddress

    now = now or _now()
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"CA key: expected an ECDSA key, got {type(ca_key).__name__}")
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, dns_names[-1])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + SERVING_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(sign_certs=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def generate_bundle(*, service: str, namespace: str, extra_sans: tuple[str, ...] = ()) -> Bundle:
    """A new CA and a serving certificate for the Service's names and ``extra_sans``."""
    ca = generate_ca(common_name=f"queuetree-webhook-ca.{namespace}")
    names, ips = split_sans(extra_sans)
    return Bundle(
        ca,
        issue_serving(
            ca, dns_names=service_dns_names(service, namespace) + names, ip_addresses=ips
        ),
    )


def ca_problem(ca: KeyPair, *, now: datetime.datetime | None = None) -> str | None:
    """Why the CA itself must be replaced (unreadable, or within a quarter of its lifetime of
    expiring), or None: a good CA keeps signing new serving certificates, so the caBundle of the
    webhook configurations never changes while it lasts."""
    now = now or _now()
    try:
        cert = x509.load_pem_x509_certificate(ca.cert_pem)
        key = serialization.load_pem_private_key(ca.key_pem, password=None)
    except ValueError as exc:
        return f"unreadable CA certificate or key: {exc}"
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        return f"the CA key is {type(key).__name__}, not ECDSA"
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    if cert.not_valid_after_utc - now < lifetime / 4:
        return f"the CA expires at {cert.not_valid_after_utc.isoformat()}"
    return None


def renewal_reason(
    bundle: Bundle,
    *,
    dns_names: list[str],
    ip_addresses: tuple[str, ...] = (),
    now: datetime.datetime | None = None,
) -> str | None:
    """Why ``bundle`` must be replaced, or None when it is good: a certificate that does not
    parse, that expires within a quarter of its lifetime, a serving certificate not signed by
    the CA, or one that lacks a DNS name or an IP address."""
    now = now or _now()
    try:
        ca = x509.load_pem_x509_certificate(bundle.ca.cert_pem)
        serving = x509.load_pem_x509_certificate(bundle.serving.cert_pem)
        serialization.load_pem_private_key(bundle.serving.key_pem, password=None)
        serialization.load_pem_private_key(bundle.ca.key_pem, password=None)
    except ValueError as exc:
        return f"unreadable certificate or key: {exc}"
    for label, cert in (("CA", ca), ("serving certificate", serving)):
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        if cert.not_valid_after_utc - now < lifetime / 4:
            return f"the {label} expires at {cert.not_valid_after_utc.isoformat()}"
    try:
        serving.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the serving certificate is not signed by the CA"
    try:
        sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        names = set(sans.value.get_values_for_type(x509.DNSName))
        ips = {str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress)}
    except x509.ExtensionNotFound:
        names, ips = set(), set()
    lacking = [n for n in dns_names if n not in names]
    lacking += [ip for ip in ip_addresses if ip not in ips]
    if lacking:
        return f"the serving certificate lacks {', '.join(lacking)}"
    return None


def overlap(check_interval: float) -> datetime.timedelta:
    """How long each step of a CA rollover lasts: :data:`CA_OVERLAP_CHECKS` check periods."""
    return datetime.timedelta(seconds=CA_OVERLAP_CHECKS * check_interval)


def split_pem(data: bytes) -> tuple[bytes, ...]:
    """The certificates of a concatenated PEM ``data``, one PEM each; () when any block does
    not parse (a caBundle edited to garbage, an empty key)."""
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        return ()
    return tuple(cert.public_bytes(serialization.Encoding.PEM) for cert in certs)


def _started(cert_pem: bytes) -> datetime.datetime:
    """When a certificate we made was made (its ``notBefore`` is backdated by BACKDATE)."""
    return x509.load_pem_x509_certificate(cert_pem).not_valid_before_utc + BACKDATE


def _usable_ca(cert_pem: bytes, now: datetime.datetime) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    return constraints.ca and cert.not_valid_after_utc > now


def _issuer_among(serving_pem: bytes, cas: tuple[bytes, ...]) -> bytes | None:
    """The CA of ``cas`` that signed the serving certificate, or None."""
    try:
        serving = x509.load_pem_x509_certificate(serving_pem)
    except ValueError:
        return None
    for ca_pem in cas:
        try:
            serving.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
        except (ValueError, TypeError, InvalidSignature):
            continue
        return ca_pem
    return None


def _unservable(serving: KeyPair, now: datetime.datetime) -> str | None:
    """Why a serving pair cannot be served at all (not merely due for renewal), or None."""
    problem = pair_problem(serving)
    if problem:
        return problem
    cert = x509.load_pem_x509_certificate(serving.cert_pem)
    if cert.not_valid_after_utc <= now:
        return f"the serving certificate expired at {cert.not_valid_after_utc.isoformat()}"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """The bundle to write into the Secret, and why (logged)."""

    bundle: Bundle
    reason: str


def next_bundle(
    current: Bundle | None,
    *,
    dns_names: list[str],
    ip_addresses: tuple[str, ...] = (),
    overlap: datetime.timedelta,
    ca_name: str,
    served: KeyPair | None = None,
    known_cas: tuple[bytes, ...] = (),
    now: datetime.datetime | None = None,
) -> Step | None:
    """The next bundle of a self-managed Secret holding ``current`` (None: missing or
    unreadable), or None when it stays as it is.

    ``served`` is the pair this replica serves now (what it loaded before the Secret was lost)
    and ``known_cas`` the CA certificates kube-apiserver may trust now (the caBundles of the
    webhook configurations, what is left readable in the Secret): a new CA keeps those that are
    still valid in the caBundle, and keeps serving a certificate one of them signed, so that
    replicas not yet past their next check are still trusted. See the module's docstring for
    the steps of a rollover; each lasts ``overlap``.
    """
    now = now or _now()
    if current is not None and ca_problem(current.ca, now=now) is None:
        return _next_with_ca(
            current, dns_names=dns_names, ip_addresses=ip_addresses, overlap=overlap, now=now
        )
    reason = (
        "the Secret is missing or unreadable"
        if current is None
        else ca_problem(current.ca, now=now)
    )
    candidates = known_cas
    if current is not None:
        candidates = (current.ca.cert_pem, *current.previous, *known_cas)
    kept: tuple[bytes, ...] = ()
    for pem in candidates:
        if pem not in kept and _usable_ca(pem, now):
            kept += (pem,)
    ca = generate_ca(common_name=ca_name, now=now)
    for pair in (served, current.serving if current is not None else None):
        if pair is not None and not _unservable(pair, now) and _issuer_among(pair.cert_pem, kept):
            return Step(
                Bundle(ca, pair, kept),
                f"{reason}: a new CA enters the caBundle beside {len(kept)} kept; the "
                f"serving certificate of the old CA is served until {now + overlap:%H:%M:%S}",
            )
    fresh = issue_serving(ca, dns_names=dns_names, ip_addresses=ip_addresses, now=now)
    return Step(
        Bundle(ca, fresh, kept),
        f"{reason}: a new CA and serving certificate"
        + (f", {len(kept)} CAs of the caBundle kept for {overlap}" if kept else ""),
    )


def pair_to_serve(
    bundle: Bundle,
    served: KeyPair | None,
    *,
    overlap: datetime.timedelta,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """The pair a replica serves: the Secret's, except that a replica keeps the pair it serves
    while the Secret's was signed by a CA younger than ``overlap`` and its own is still trusted
    (signed by a previous CA of the bundle). That happens when a replica that restarted
    without the Secret had to make a new CA and pair at once: the replicas that still serve the
    old pair go on serving it until kube-apiserver surely holds the new CA."""
    now = now or _now()
    if (
        served is None
        or served == bundle.serving
        or not bundle.previous
        or now >= _started(bundle.ca.cert_pem) + overlap
        or _unservable(served, now)
        or _issuer_among(served.cert_pem, bundle.previous) is None
    ):
        return bundle.serving
    return served


def _next_with_ca(
    current: Bundle,
    *,
    dns_names: list[str],
    ip_addresses: tuple[str, ...],
    overlap: datetime.timedelta,
    now: datetime.datetime,
) -> Step | None:
    """The next bundle when the CA itself is good (see :func:`next_bundle`)."""

    def reissued(why: str) -> Step:
        serving = issue_serving(current.ca, dns_names=dns_names, ip_addresses=ip_addresses, now=now)
        return Step(Bundle(current.ca, serving, current.previous), why)

    issuer = _issuer_among(current.serving.cert_pem, current.trusted)
    if issuer is None:
        return reissued("the serving certificate is not signed by a CA of the caBundle")
    unservable = _unservable(current.serving, now)
    if issuer != current.ca.cert_pem:
        # Staged: the replicas serve the old CA's certificate until the new CA has been in
        # the caBundle for the overlap.
        due = _started(current.ca.cert_pem) + overlap
        if unservable:
            return reissued(f"{unservable}; issued by the new CA before {due:%H:%M:%S}")
        if now >= due:
            return reissued(f"the new CA has been in the caBundle since {due - overlap:%H:%M:%S}")
        return None
    problem = renewal_reason(
        Bundle(current.ca, current.serving), dns_names=dns_names, ip_addresses=ip_addresses, now=now
    )
    if problem:
        return reissued(problem)
    if current.previous:
        # Replicas that kept their pair while the new CA was young (:func:`pair_to_serve`)
        # load the new one at the end of that time: the overlap runs from the later of the two.
        switched = max(_started(current.serving.cert_pem), _started(current.ca.cert_pem) + overlap)
        due = switched + overlap
        if now >= due:
            return Step(
                Bundle(current.ca, current.serving),
                f"the new CA's serving certificate has been served since "
                f"{switched:%H:%M:%S}: {len(current.previous)} previous CA(s) leave the "
                "caBundle",
            )
    return None


TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
"""TLS 1.2 suites: ECDHE key exchange with AEAD ciphers only, no CBC (Lucky13 and padding
oracles) and no static RSA key exchange (no forward secrecy): the suites Go's TLS client, which
kube-apiserver uses, prefers. TLS 1.3 suites are all AEAD and not affected."""


def server_context(min_version: str = "VersionTLS12") -> ssl.SSLContext:
    """A server TLS context, TLS 1.2 or newer (``VersionTLS13`` for 1.3 only) with
    :data:`TLS12_CIPHERS`; serve pairs through a :class:`ServingContext` built on it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = (
        ssl.TLSVersion.TLSv1_3 if min_version == "VersionTLS13" else ssl.TLSVersion.TLSv1_2
    )
    context.set_ciphers(TLS12_CIPHERS)
    return context


class ServingContext:
    """The TLS context a listener serves, whose certificate is replaced atomically.

    ``ssl`` can only add a pair to a context, and a context holds one certificate per key
    type: loading into the live one would serve a new certificate with the old key when the
    key does not match yet (every handshake fails), and an RSA pair next to an ECDSA one would
    leave clients that prefer ECDSA with the old certificate. So each pair is loaded into a
    new context, checked, and only then made current; the listening context (:attr:`context`,
    which keeps the TLS version and cipher policy) hands every handshake to the current one
    from its server-name callback, which OpenSSL calls for every ClientHello, with or without
    SNI. Open connections keep the pair they started with.
    """

    def __init__(self, factory: Callable[[], ssl.SSLContext]) -> None:
        self._factory = factory
        self.context = factory()
        self.current: ssl.SSLContext | None = None
        self.context.sni_callback = self._select

    @property
    def loaded(self) -> bool:
        return self.current is not None

    def load(self, pair: KeyPair) -> None:
        """Serve ``pair`` to new handshakes, or raise :class:`CertificateError` saying why it
        cannot be served (then the previous pair stays)."""
        problem = pair_problem(pair)
        if problem:
            raise CertificateError(problem)
        fresh = self._factory()
        try:
            load_pair(fresh, pair)
        except (ssl.SSLError, ValueError) as exc:
            raise CertificateError(f"the pair does not load: {exc}") from exc
        self.current = fresh

    def _select(
        self, connection: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        if self.current is not None:
            connection.context = self.current


def pair_problem(pair: KeyPair) -> str | None:
    """Why a certificate and key cannot be served together, or None: either does not parse (a
    file half written), or the certificate's public key is not the key's."""
    try:
        cert = x509.load_pem_x509_certificate(pair.cert_pem)
    except ValueError as exc:
        return f"the certificate does not parse: {exc}"
    try:
        key = serialization.load_pem_private_key(pair.key_pem, password=None)
    except (ValueError, TypeError) as exc:
        return f"the private key does not parse: {exc}"
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        return (
            f"the certificate (serial {cert.serial_number:x}, "
            f"{type(cert.public_key()).__name__.lstrip('_')}) is not for the private key "
            f"({type(key).__name__.lstrip('_')}): certificate and key do not match"
        )
    return None


def load_pair(context: ssl.SSLContext, pair: KeyPair) -> None:
    """Load ``pair`` into a fresh ``context`` (never into one that serves: see
    :class:`ServingContext`).

    ``ssl`` reads certificates only from files: the pair goes through a private temporary
    directory (``$TMPDIR``; in the Deployment an emptyDir, the root filesystem is read-only),
    removed at once.
    """
    with tempfile.TemporaryDirectory(prefix="queuetree-tls-") as tmp:
        cert_path, key_path = pathlib.Path(tmp) / "tls.crt", pathlib.Path(tmp) / "tls.key"
        cert_path.write_bytes(pair.cert_pem)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as key_file:
            key_file.write(pair.key_pem)
        context.load_cert_chain(cert_path, key_path)


# -- sources -----------------------------------------------------------------------------------


class FileSource:
    """Certificate and key files, re-read when their contents change."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._digest = b""
        self._refused = b""
        """The last pair that could not be served (logged once, not at every check)."""

    def read(self) -> KeyPair:
        try:
            return KeyPair(
                pathlib.Path(self.cert_file).read_bytes(),
                pathlib.Path(self.key_file).read_bytes(),
            )
        except OSError as exc:
            raise CertificateError(f"cannot read {exc.filename}: {exc.strerror}") from exc

    def refresh(self, serving: ServingContext) -> bool:
        """Serve the files if they changed since the last load; True when a new pair is served.

        A pair that cannot be served (certificate and key not matching yet in a rotation that
        copies one file before the other, a file half written, a key of another type than the
        certificate) keeps the previous pair serving, says why in the log once, and is tried
        again at the next refresh. With no previous pair it raises :class:`CertificateError`.
        """
        pair = self.read()
        digest = hashlib.sha256(pair.cert_pem + b"\0" + pair.key_pem).digest()
        if digest in (self._digest, self._refused):
            return False
        try:
            serving.load(pair)
        except CertificateError as exc:
            if not serving.loaded:
                raise CertificateError(f"{self.cert_file} and {self.key_file}: {exc}") from exc
            self._refused = digest
            logger.warning(
                "%s and %s changed but are not served yet (the previous pair still is): %s",
                self.cert_file,
                self.key_file,
                exc,
            )
            return False
        self._digest = digest
        return True


class CertificateError(Exception):
    """Certificates that cannot be loaded, read or stored; the message says which and why."""


class SecretSource:
    """The pair in a Secret: self-managed (create, renew, inject the CA) or read-only."""

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str,
        secret_name: str,
        service_name: str,
        manage: bool,
        mutating_config: str = "",
        validating_config: str = "",
        extra_sans: tuple[str, ...] = (),
        check_interval: float = 10.0,
    ) -> None:
        self._api_client = api_client
        self.overlap = overlap(check_interval)
        self.namespace = namespace
        self.secret_name = secret_name
        self.service_name = service_name
        self.extra_sans = extra_sans
        self.manage = manage
        self.mutating_config = mutating_config
        self.validating_config = validating_config
        self._digest = b""
        self._served: KeyPair | None = None
        """The pair this replica serves: kept serving (and trusted) if the Secret is lost."""

    async def refresh(self, serving: ServingContext) -> bool:
        """Make sure the Secret holds a good pair (self-managed), serve it if it changed, and
        keep the caBundles current. True when a new pair is served. A pair that cannot be
        served raises :class:`CertificateError`, and the previous pair keeps serving."""
        pair, ca_bundle = await self._current_pair()
        # The caBundle first: a pair signed by a new CA is served only once this replica has
        # written that CA (the rollover's overlap covers the other replicas and kube-apiserver).
        unwritten: CertificateError | None = None
        if self.manage and ca_bundle:
            try:
                await self.inject_ca_bundle(ca_bundle)
            except CertificateError as exc:
                unwritten = exc
        changed = False
        digest = hashlib.sha256(pair.cert_pem + b"\0" + pair.key_pem).digest()
        if digest != self._digest:
            try:
                serving.load(pair)
            except CertificateError as exc:
                raise CertificateError(
                    f"Secret {self.namespace}/{self.secret_name}: not a usable pair: {exc}"
                ) from exc
            self._digest = digest
            self._served = pair
            changed = True
        if unwritten is not None:
            raise unwritten
        return changed

    async def _current_pair(self) -> tuple[KeyPair, str]:
        for _attempt in range(5):
            secret = await self._read_secret()
            if not self.manage:
                if secret is None:
                    raise CertificateError(
                        f"Secret {self.namespace}/{self.secret_name} does not exist yet"
                    )
                return _pair_from(secret, TLS_CERT_KEY, TLS_KEY_KEY), ""
            extra_names, ips = split_sans(self.extra_sans)
            dns_names = service_dns_names(self.service_name, self.namespace) + extra_names
            bundle = _bundle_from(secret) if secret is not None else None
            known: tuple[bytes, ...] = ()
            if bundle is None or ca_problem(bundle.ca) is not None:
                # A new CA: what kube-apiserver trusts now stays trusted for the overlap.
                known = _leftover_cas(secret) + await self._configured_cas()
            step = next_bundle(
                bundle,
                dns_names=dns_names,
                ip_addresses=ips,
                overlap=self.overlap,
                ca_name=f"queuetree-webhook-ca.{self.namespace}",
                served=self._served,
                known_cas=known,
            )
            if step is None and bundle is not None:
                return self._to_serve(bundle), bundle.ca_bundle
            assert step is not None
            logger.info("Secret %s/%s: %s", self.namespace, self.secret_name, step.reason)
            if await self._write_secret(step.bundle, secret):
                return self._to_serve(step.bundle), step.bundle.ca_bundle
            # Another replica wrote first (409): read theirs on the next attempt.
        raise CertificateError(
            f"Secret {self.namespace}/{self.secret_name}: kept conflicting with other writers"
        )

    def _to_serve(self, bundle: Bundle) -> KeyPair:
        pair = pair_to_serve(bundle, self._served, overlap=self.overlap)
        if pair is not bundle.serving:
            logger.info(
                "Secret %s/%s: its CA is new; the pair served so far stays until kube-apiserver "
                "surely trusts the new CA",
                self.namespace,
                self.secret_name,
            )
        return pair

    async def _read_secret(self) -> dict[str, Any] | None:
        status, secret = await _call(
            calls.call(self._api_client, "GET", paths.secret(self.namespace, self.secret_name))
        )
        if status == 404:
            return None
        _check(status, secret, doing=f"reading Secret {self.namespace}/{self.secret_name}")
        return secret

    async def _write_secret(self, bundle: Bundle, existing: dict[str, Any] | None) -> bool:
        """Create or replace the Secret; False on a 409 (another replica wrote first)."""

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode("ascii")

        data = {
            TLS_CERT_KEY: b64(bundle.serving.cert_pem),
            TLS_KEY_KEY: b64(bundle.serving.key_pem),
            CA_CERT_KEY: b64(bundle.ca.cert_pem),
            CA_KEY_KEY: b64(bundle.ca.key_pem),
        }
        if bundle.previous:
            data[CA_PREVIOUS_KEY] = b64(b"".join(bundle.previous))
        body = bodies.tls_secret(
            self.secret_name,
            self.namespace,
            data=data,
            labels={"app.kubernetes.io/managed-by": "queuetree-webhook"},
            resource_version="" if existing is None else bodies.resource_version_of(existing),
        )
        if existing is None:
            call = calls.call(self._api_client, "POST", paths.secrets(self.namespace), body=body)
        else:
            call = calls.call(
                self._api_client, "PUT", paths.secret(self.namespace, self.secret_name), body=body
            )
        status, answer = await _call(call)
        if status == 409:
            return False
        _check(status, answer, doing=f"writing Secret {self.namespace}/{self.secret_name}")
        return True

    def _webhook_configurations(self) -> list[tuple[str, str]]:
        """(name, path) of each configuration whose caBundle this replica keeps."""
        configurations = [
            (self.mutating_config, paths.mutating_webhook_configuration),
            (self.validating_config, paths.validating_webhook_configuration),
        ]
        return [(name, path(name)) for name, path in configurations if name]

    async def _configured_cas(self) -> tuple[bytes, ...]:
        """The CA certificates in the caBundles of the webhook configurations now (what
        kube-apiserver trusts); none from a configuration that cannot be read."""
        found: tuple[bytes, ...] = ()
        for _name, path in self._webhook_configurations():
            status, config = await _call(calls.call(self._api_client, "GET", path))
            if status != 200:
                continue
            for webhook in config.get("webhooks") or []:
                bundle = (webhook.get("clientConfig") or {}).get("caBundle") or ""
                try:
                    found += split_pem(base64.b64decode(bundle))
                except ValueError:
                    continue
        return found

    async def inject_ca_bundle(self, ca_bundle: str) -> None:
        """Write ``ca_bundle`` into every webhook of the two configurations, where it differs.

        A configuration that does not exist yet is skipped (the next refresh tries again).
        """
        for name, path in self._webhook_configurations():
            status, config = await _call(calls.call(self._api_client, "GET", path))
            if status == 404:
                logger.warning("webhook configuration %s not found; caBundle not set", name)
                continue
            _check(status, config, doing=f"reading webhook configuration {name}")
            operations = []
            for index, webhook in enumerate(config.get("webhooks") or []):
                client_config = webhook.get("clientConfig") or {}
                found = client_config.get("caBundle")
                if found != ca_bundle:
                    if found and not _decodes_to_certificates(found):
                        logger.warning(
                            "webhook %s of %s: its caBundle is not a PEM certificate bundle "
                            "(edited by hand?); kube-apiserver cannot call it: written back "
                            "from Secret %s/%s",
                            webhook.get("name", index),
                            name,
                            self.namespace,
                            self.secret_name,
                        )
                    operations.append(
                        {
                            "op": "replace" if "caBundle" in client_config else "add",
                            "path": f"/webhooks/{index}/clientConfig/caBundle",
                            "value": ca_bundle,
                        }
                    )
            if operations:
                status, answer = await _call(
                    calls.call(
                        self._api_client,
                        "PATCH",
                        path,
                        body=operations,
                        content_type=calls.JSON_PATCH,
                    )
                )
                _check(status, answer, doing=f"patching the caBundle of {name}")
                logger.info("caBundle written into %d webhooks of %s", len(operations), name)


async def _call(request: Any) -> tuple[int, dict[str, Any]]:
    """Await a kubernetes-asyncio call made with ``_preload_content=False``: status and JSON.

    Such calls return the raw response whatever its status (no ApiException), which lets a
    404 or a 409 be an answer rather than an error.
    """
    response = await request
    async with response:
        try:
            body = await response.json(content_type=None)
        except ValueError:
            body = {"message": (await response.text())[:200]}
    return response.status, body if isinstance(body, dict) else {}


def _check(status: int, body: dict[str, Any], *, doing: str) -> None:
    if not 200 <= status < 300:
        raise CertificateError(f"{doing}: HTTP {status}: {body.get('message', body)}")


def _decoded(secret: dict[str, Any], key: str) -> bytes:
    data = secret.get("data") or {}
    value = data.get(key)
    if not isinstance(value, str):
        name = bodies.name_of(secret) or "?"
        raise CertificateError(f"Secret {name}: no {key}")
    return base64.b64decode(value)


def _pair_from(secret: dict[str, Any], cert_key: str, key_key: str) -> KeyPair:
    return KeyPair(_decoded(secret, cert_key), _decoded(secret, key_key))


def _bundle_from(secret: dict[str, Any]) -> Bundle | None:
    try:
        previous = (secret.get("data") or {}).get(CA_PREVIOUS_KEY)
        return Bundle(
            ca=_pair_from(secret, CA_CERT_KEY, CA_KEY_KEY),
            serving=_pair_from(secret, TLS_CERT_KEY, TLS_KEY_KEY),
            previous=split_pem(base64.b64decode(previous)) if isinstance(previous, str) else (),
        )
    except (CertificateError, ValueError):
        return None


def _leftover_cas(secret: dict[str, Any] | None) -> tuple[bytes, ...]:
    """The CA certificates still readable in a Secret whose bundle is not usable."""
    found: tuple[bytes, ...] = ()
    for key in (CA_CERT_KEY, CA_PREVIOUS_KEY):
        try:
            found += split_pem(_decoded(secret or {}, key))
        except (CertificateError, ValueError):
            continue
    return found


def _decodes_to_certificates(ca_bundle: str) -> bool:
    try:
        return bool(split_pem(base64.b64decode(ca_bundle, validate=True)))
    except ValueError:
        return False
