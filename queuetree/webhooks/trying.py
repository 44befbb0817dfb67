"""Trying an object against the webhook's own endpoints, without a server or an API server.

``queuetree whatif`` asks what would happen if a queue were edited or a pod submitted: the
answer must be the webhook's, so each object goes through :func:`reviewing.review` exactly as
kube-apiserver would send it (an AdmissionReview built by ``admission.review_of``), and a
mutating endpoint's patch is applied to the object.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch

from queuetree.api import admission
from queuetree.webhooks import reviewing, views
from queuetree.webhooks import settings as settings_

RESOURCES = {
    "Queue": admission.Resource(
        group="scheduling.volcano.sh", version="v1beta1", resource="queues"
    ),
    "Pod": admission.Resource(group="", version="v1", resource="pods"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Tried:
    object: Mapping[str, Any]
    """The object as the endpoint left it (patched, for a mutating endpoint)."""
    message: str | None
    """The denial, or None when the endpoint allowed the object."""


def try_object(
    path: str,
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> Tried:
    """Run the endpoint ``path`` on ``obj`` (of kind Queue or Pod)."""
    review = admission.review_of(obj, resource=RESOURCES[str(obj.get("kind"))], old=old)
    answer = reviewing.review(path, json.dumps(review).encode(), view=view, settings=settings)
    response = json.loads(answer.body)["response"]
    if not response["allowed"]:
        return Tried(object=obj, message=admission.refusal_message(response, "denied"))
    operations = admission.decode_patch(response)
    if not operations:
        return Tried(object=obj, message=None)
    return Tried(object=jsonpatch.apply_patch(dict(obj), list(operations)), message=None)
