"""The API server's URL paths of the objects queuetree reads and writes (``/api/v1/...``,
``/apis/...``).

Each returns a path, percent-encoded, to append to the server's base URL. Names and
namespaces are DNS labels or subdomains once the API server has admitted the object; they are
encoded anyway, so that a name read off a malformed body can never change the path's shape.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from queuetree.api import bodies

_VOLCANO: Final = f"/apis/{bodies.VOLCANO_GROUP}/{bodies.VOLCANO_VERSION}"


def _segment(value: str) -> str:
    return quote(value, safe="")


def pod(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}"


def pod_eviction(namespace: str, name: str) -> str:
    return f"{pod(namespace, name)}/eviction"


def events(namespace: str) -> str:
    return f"/api/v1/namespaces/{_segment(namespace)}/events"


def queues() -> str:
    return f"{_VOLCANO}/queues"


def queue(name: str) -> str:
    return f"{queues()}/{_segment(name)}"


def queue_status(name: str) -> str:
    return f"{queue(name)}/status"


def pod_group(namespace: str, name: str) -> str:
    return f"{_VOLCANO}/namespaces/{_segment(namespace)}/podgroups/{_segment(name)}"


def pod_group_status(namespace: str, name: str) -> str:
    return f"{_VOLCANO}/namespaces/{_segment(namespace)}/podgroups/{_segment(name)}/status"


def namespaced(api_version: str, plural: str, namespace: str, name: str) -> str:
    """The path of a namespaced object of ``api_version`` (``v1`` is the core group's)."""
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{root}/namespaces/{_segment(namespace)}/{plural}/{_segment(name)}"


def pod_groups(namespace: str) -> str:
    return f"{_VOLCANO}/namespaces/{_segment(namespace)}/podgroups"


# -- what the informers list and watch, and the webhook's own objects ---------------------------


def all_pods() -> str:
    return "/api/v1/pods"


def namespaces() -> str:
    return "/api/v1/namespaces"


def nodes() -> str:
    return "/api/v1/nodes"


def all_pod_groups() -> str:
    return f"{_VOLCANO}/podgroups"


def secrets(namespace: str) -> str:
    return f"/api/v1/namespaces/{_segment(namespace)}/secrets"


def secret(namespace: str, name: str) -> str:
    return f"{secrets(namespace)}/{_segment(name)}"


_ADMISSIONREGISTRATION: Final = "/apis/admissionregistration.k8s.io/v1"


def mutating_webhook_configuration(name: str) -> str:
    return f"{_ADMISSIONREGISTRATION}/mutatingwebhookconfigurations/{_segment(name)}"


def validating_webhook_configuration(name: str) -> str:
    return f"{_ADMISSIONREGISTRATION}/validatingwebhookconfigurations/{_segment(name)}"
