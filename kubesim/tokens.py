"""ServiceAccount tokens: the TokenRequest API (`serviceaccounts/<name>/token`) and the bearer
authentication of the tokens it issues.

`kubectl create token NAME -n NS` posts an `authentication.k8s.io/v1` TokenRequest to the
ServiceAccount's `token` subresource and prints `status.token`. kube-apiserver answers with a
signed JWT bound to the ServiceAccount's uid; presented as a bearer token, it authenticates as
`system:serviceaccount:<ns>:<name>` with the groups `system:serviceaccounts`,
`system:serviceaccounts:<ns>` and `system:authenticated`, until it expires or the ServiceAccount
is deleted (then 401).

kubesim does the same with a JWT-shaped token whose claims are real and whose signature is
random: only kubesim reads it back, through the table :class:`Issuer` keeps (tokens do not
survive a restart, as kubesim's objects do not). Authentication is all kubesim does with them:
it authorizes every request (kubesim/README.md).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from kubesim import errors

DEFAULT_EXPIRATION_SECONDS = 3600
"""`spec.expirationSeconds` when the request gives none (kube-apiserver's default, 1 h)."""
MIN_EXPIRATION_SECONDS = 600
MAX_EXPIRATION_SECONDS = 2**32
DEFAULT_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)
"""The audiences of a token whose request names none (kube-apiserver's `--api-audiences`
defaults to its `--service-account-issuer`)."""
ISSUER = "https://kubernetes.default.svc.cluster.local"


@dataclasses.dataclass(frozen=True, slots=True)
class Issued:
    """What a token stands for: the ServiceAccount (by uid) and when it stops working."""

    namespace: str
    name: str
    uid: str
    expires: datetime.datetime


def username(namespace: str, name: str) -> str:
    """The user a ServiceAccount's tokens authenticate as."""
    return f"system:serviceaccount:{namespace}:{name}"


def user_info(issued: Issued) -> dict[str, Any]:
    """The `userInfo` of a request made with a token (what webhooks see in AdmissionReviews)."""
    return {
        "username": username(issued.namespace, issued.name),
        "uid": issued.uid,
        "groups": [
            "system:serviceaccounts",
            f"system:serviceaccounts:{issued.namespace}",
            "system:authenticated",
        ],
    }


def _segment(document: Mapping[str, Any]) -> str:
    raw = json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _rfc3339(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Issuer:
    """Issues TokenRequest tokens and authenticates them (see the module docstring).

    `now` is injectable so tests can expire tokens without waiting.
    """

    def __init__(
        self,
        *,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._now = now
        self._issued: dict[str, Issued] = {}

    def issue(
        self, *, namespace: str, name: str, uid: str, request: Any
    ) -> tuple[str, dict[str, Any]]:
        """A new token for the ServiceAccount `namespace/name` (uid `uid`) and the
        TokenRequest to answer with (`status.token`, `status.expirationTimestamp`).

        Raises 400 for a body that is not a TokenRequest and 422 for an expiration outside
        [10 minutes, 2^32 seconds], with kube-apiserver's messages.
        """
        if request is None:
            request = {}
        if not isinstance(request, dict):
            raise errors.bad_request(
                "the body of a token request must be an authentication.k8s.io/v1 TokenRequest"
            )
        spec = request.get("spec") or {}
        if not isinstance(spec, dict):
            raise errors.bad_request("spec: must be an object")
        seconds = spec.get("expirationSeconds")
        if seconds is None:
            seconds = DEFAULT_EXPIRATION_SECONDS
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            raise errors.bad_request(f"spec.expirationSeconds: not an integer: {seconds!r}")
        causes = []
        if seconds < MIN_EXPIRATION_SECONDS:
            causes.append(
                errors.field_invalid(
                    "spec.expirationSeconds",
                    seconds,
                    "may not specify a duration less than 10 minutes",
                )
            )
        elif seconds > MAX_EXPIRATION_SECONDS:
            causes.append(
                errors.field_invalid(
                    "spec.expirationSeconds",
                    seconds,
                    "may not specify a duration larger than 2^32 seconds",
                )
            )
        if causes:
            raise errors.invalid("TokenRequest", "authentication.k8s.io", name=name, causes=causes)
        audiences = spec.get("audiences") or list(DEFAULT_AUDIENCES)
        issued_at = self._now().replace(microsecond=0)
        expires = issued_at + datetime.timedelta(seconds=seconds)
        claims = {
            "aud": audiences,
            "exp": int(expires.timestamp()),
            "iat": int(issued_at.timestamp()),
            "iss": ISSUER,
            "jti": secrets.token_hex(16),
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": uid},
            },
            "nbf": int(issued_at.timestamp()),
            "sub": username(namespace, name),
        }
        signature = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        token = ".".join(
            (_segment({"alg": "RS256", "kid": "kubesim"}), _segment(claims), signature)
        )
        self._issued[token] = Issued(namespace=namespace, name=name, uid=uid, expires=expires)
        answer = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "creationTimestamp": _rfc3339(issued_at),
            },
            "spec": {
                "audiences": audiences,
                "expirationSeconds": seconds,
                "boundObjectRef": spec.get("boundObjectRef"),
            },
            "status": {"token": token, "expirationTimestamp": _rfc3339(expires)},
        }
        return token, answer

    def authenticate(
        self, token: str, *, service_account_uid: Callable[[str, str], str | None]
    ) -> dict[str, Any] | None:
        """The `userInfo` of an issued token; None when kubesim never issued it.

        `service_account_uid(namespace, name)` is the uid of the ServiceAccount as stored now
        (None when it is gone). A token that expired, or whose ServiceAccount was deleted (or
        deleted and created again: the uid differs), raises 401 Unauthorized, as
        kube-apiserver answers.
        """
        issued = self._issued.get(token)
        if issued is None:
            return None
        if (
            self._now() >= issued.expires
            or service_account_uid(issued.namespace, issued.name) != issued.uid
        ):
            raise errors.ApiError(401, "Unauthorized", message="Unauthorized")
        return user_info(issued)
