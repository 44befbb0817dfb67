"""Dynamic admission as kube-apiserver does it: webhook matching, TLS calls, patches, denials.

The server decodes and defaults a request, then calls `Admission.mutate` (mutating webhooks,
configurations sorted by name, webhooks in order, with one reinvocation round for
`reinvocationPolicy: IfNeeded`), runs its strategy and validation, then calls
`Admission.validate` (validating webhooks in parallel) right before persisting. Both read the
current Mutating/ValidatingWebhookConfigurations and Namespaces through `list_objects`, so a
configuration applied a moment ago takes effect on the next request, as in a real cluster.

What follows kube-apiserver (k8s.io/apiserver/pkg/admission/plugin/webhook), word for word
where clients or people read it:

- matching: `rules` (operations incl. `*`; groups; versions; resources `*`, `*/*`, `pods/*`,
  `*/status`: `*` alone excludes subresources; scope), then `namespaceSelector` against the
  namespace's labels (a Namespace's own labels on its CREATE/UPDATE; cluster-scoped objects
  always match), then `objectSelector` against the new or the old object's labels;
- webhook configurations are never intercepted;
- calls: HTTPS only, the server certificate verified with `caBundle` (system roots when it is
  empty) and SANs only; a `service` reference is resolved by `resolve_service` to an address
  the test chose, and verified as `<name>.<namespace>.svc`; `?timeout=Ns` tells the webhook its
  budget; `timeoutSeconds` defaults to 10;
- `failurePolicy` (default Fail) applies to call failures only (unreachable, timeout, bad TLS,
  invalid response); a denial always rejects. Under Fail a failure answers 500 `Internal error
  occurred: failed calling webhook "<n>": failed to call webhook: Post "<url>": <err>`;
- dry run: `sideEffects` must be `None` or `NoneOnDryRun`, else 400
  `admission webhook "<n>" does not support dry run`;
- responses: `apiVersion`/`kind`/`uid` must echo the request; `patch` and `patchType`
  (`JSONPatch`) come together and only from mutating webhooks; warnings are collected;
- denials: the webhook's `status` with `code` raised to at least 400 and the message
  `admission webhook "<n>" denied the request: <message|reason>` or `... without explanation`.

- `matchConditions` (CEL, `kubesim.cel`): all true calls the webhook, any false skips it, an
  evaluation error rejects under Fail (403 `<resource> "<n>" is forbidden: expression '<e>'
  resulted in error: <why>`) and skips under Ignore.

Deviations (kubesim is test infrastructure): `matchPolicy: Equivalent` has no equivalent
resources to find (every resource is served in one version), CEL is not type-checked and has
no `authorizer`, and a patched built-in object keeps fields its Go type would have dropped. When
several validating webhooks reject, the first in configuration order wins (kube-apiserver
returns whichever finished first).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import json
import logging
import ssl
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aiohttp
import jsonpatch
import yarl

from kubesim import cel, certs, errors

logger = logging.getLogger(__name__)

ListObjectsFn = Callable[[str, str, str], list[dict]]
"""(group, version, plural) -> every current object of that resource, cluster-wide."""

ResolveServiceFn = Callable[[str, str, int], tuple[str, int]]
"""(namespace, name, port) of a Service -> the (host, port) to connect to instead."""

ADMISSIONREGISTRATION = "admissionregistration.k8s.io"
MUTATING_PLURAL = "mutatingwebhookconfigurations"
VALIDATING_PLURAL = "validatingwebhookconfigurations"

DEFAULT_TIMEOUT_SECONDS = 10
"""kube-apiserver's default `timeoutSeconds` for admissionregistration.k8s.io/v1 webhooks."""

_EXEMPT_RESOURCES = frozenset(
    {
        MUTATING_PLURAL,
        VALIDATING_PLURAL,
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    }
)
"""Admission configuration itself is never sent to webhooks, so a broken webhook can always be
removed (`rules.IsExemptAdmissionConfigurationResource`)."""

_REVIEW_VERSIONS = ("v1", "v1beta1")
_OPTIONS_KINDS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@dataclasses.dataclass(frozen=True, slots=True)
class AdmissionAttributes:
    """One API request as admission sees it (kube-apiserver's `admission.Attributes`)."""

    operation: str  # "CREATE" | "UPDATE" | "DELETE" | "CONNECT"
    group: str  # of the resource: "" for the core group
    version: str
    resource: str  # plural: "pods"
    subresource: str  # "" for the main resource, else "status", "eviction", "binding", ...
    kind: dict  # {"group", "version", "kind"} of `obj` (an Eviction for pods/eviction)
    name: str
    namespace: str  # "" for cluster-scoped resources
    user: dict  # {"username": ..., "groups": [...]}
    obj: dict | None  # None for DELETE
    old_obj: dict | None  # None for CREATE
    dry_run: bool
    options: dict | None  # CreateOptions / UpdateOptions / DeleteOptions, or None for defaults


class AdmissionDenied(Exception):
    """The request is rejected; `status` is the full `metav1.Status` body to answer with."""

    def __init__(self, status: dict) -> None:
        super().__init__(status.get("message", ""))
        self.status = status


class SelectorError(ValueError):
    """A label selector that cannot be evaluated (unknown operator, values where none belong)."""


def _status(code: int, reason: str, message: str, **details: Any) -> dict:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def internal_error_status(message: str) -> dict:
    """kube-apiserver's `NewInternalError`: 500, `Internal error occurred: <message>`."""
    return _status(
        500, "InternalError", f"Internal error occurred: {message}", causes=[{"message": message}]
    )


def warning_header(text: str) -> str:
    """The `Warning` header value for one warning, as kube-apiserver writes it.

    `299 - "<text>"` with `"` and `\\` escaped by a backslash (RFC 7234 quoted-string); kubectl
    prints it as `Warning: <text>`. Line breaks cannot travel in a header, so they become spaces.
    """
    escaped = text.replace("\r", " ").replace("\n", " ").replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


# --- Label selectors -------------------------------------------------------------------------


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy a metav1.LabelSelector (`matchLabels` and `matchExpressions`).

    Edges, as `metav1.LabelSelectorAsSelector` defines them: a missing or empty selector
    matches everything; all requirements must hold; `NotIn` and `DoesNotExist` hold when the
    key is absent. Raises SelectorError for an unknown operator, for `In`/`NotIn` without
    values and for `Exists`/`DoesNotExist` with values (the API rejects those at creation).
    """
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for index, expression in enumerate(selector.get("matchExpressions") or []):
        key = expression.get("key", "")
        operator = expression.get("operator", "")
        values = expression.get("values") or []
        where = f"matchExpressions[{index}] (key {key!r})"
        if operator in ("In", "NotIn"):
            if not values:
                raise SelectorError(f"{where}: operator {operator} needs values, got none")
            present = key in labels and labels[key] in values
            if present != (operator == "In"):
                return False
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                raise SelectorError(f"{where}: operator {operator} takes no values, got {values}")
            if (key in labels) != (operator == "Exists"):
                return False
        else:
            raise SelectorError(f"{where}: unknown operator {operator!r}")
    return True


# --- Configurations: defaults and validation, as the API applies them on write ----------------

_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES = ("*", "Cluster", "Namespaced")
_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "In", "NotIn")


def default_configuration(configuration: dict, *, mutating: bool) -> None:
    """Fill the v1 defaults of a webhook configuration in place (what `kubectl get` then shows).

    Per webhook: `failurePolicy: Fail`, `matchPolicy: Equivalent`, empty `namespaceSelector` and
    `objectSelector`, `timeoutSeconds: 10`, `reinvocationPolicy: Never` (mutating only); per
    rule `scope: "*"`; per service reference `port: 443`.
    """
    for hook in configuration.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)


def _not_supported(field: str, value: Any, supported: Sequence[str]) -> errors.FieldCause:
    listed = ", ".join(json.dumps(v) for v in supported)
    return errors.FieldCause(
        field, "FieldValueNotSupported", f"{json.dumps(value)}: supported values: {listed}"
    )


def _validate_selector(field: str, selector: Any) -> list[errors.FieldCause]:
    if selector is None:
        return []
    if not isinstance(selector, dict):
        return [errors.field_invalid(field, selector, "must be a label selector")]
    causes = []
    for index, expression in enumerate(selector.get("matchExpressions") or []):
        where = f"{field}.matchExpressions[{index}]"
        operator = expression.get("operator")
        values = expression.get("values") or []
        if operator not in _SELECTOR_OPERATORS:
            causes.append(
                errors.field_invalid(f"{where}.operator", operator, "not a valid selector operator")
            )
        elif operator in ("In", "NotIn") and not values:
            causes.append(
                errors.field_required(
                    f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                )
            )
        elif operator in ("Exists", "DoesNotExist") and values:
            causes.append(
                errors.field_forbidden(
                    f"{where}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    return causes


def _validate_client_config(field: str, config: Any) -> list[errors.FieldCause]:
    config = config if isinstance(config, dict) else {}
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [errors.field_required(field, "exactly one of url or service is required")]
    if url is not None:
        parsed = yarl.URL(str(url))
        problem = ""
        if parsed.scheme != "https":
            problem = "'https' is the only allowed URL scheme"
        elif not parsed.host:
            problem = "host must be specified"
        elif parsed.user or parsed.password:
            problem = "user information is not permitted in the URL"
        elif parsed.fragment:
            problem = "fragments are not permitted in the URL"
        elif parsed.query_string:
            problem = "query parameters are not permitted in the URL"
        return [errors.field_invalid(f"{field}.url", url, problem)] if problem else []
    causes = []
    for key in ("name", "namespace"):
        if not service.get(key):
            causes.append(
                errors.field_required(f"{field}.service.{key}", f"service {key} is required")
            )
    path = service.get("path")
    if path is not None and not str(path).startswith("/"):
        causes.append(errors.field_invalid(f"{field}.service.path", path, "must start with a '/'"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(
            errors.field_invalid(
                f"{field}.service.port",
                port,
                "port is not valid: must be between 1 and 65535, inclusive",
            )
        )
    return causes


def _validate_rule(field: str, rule: Any) -> list[errors.FieldCause]:
    if not isinstance(rule, dict):
        return [errors.field_invalid(field, rule, "must be a rule")]
    causes = []
    operations = rule.get("operations") or []
    if not operations:
        causes.append(errors.field_required(f"{field}.operations", ""))
    elif "*" in operations and len(operations) > 1:
        causes.append(
            errors.field_invalid(
                f"{field}.operations",
                operations,
                "if '*' is present, must not specify other operations",
            )
        )
    for index, operation in enumerate(operations):
        if operation not in _OPERATIONS:
            causes.append(_not_supported(f"{field}.operations[{index}]", operation, _OPERATIONS))
    for key in ("apiGroups", "apiVersions", "resources"):
        if not rule.get(key):
            causes.append(errors.field_required(f"{field}.{key}", ""))
    resources = rule.get("resources") or []
    if "*/*" in resources and len(resources) > 1:
        causes.append(
            errors.field_invalid(
                f"{field}.resources",
                resources,
                "if '*/*' is present, must not specify other resources",
            )
        )
    scope = rule.get("scope", "*")
    if scope not in _SCOPES:
        causes.append(_not_supported(f"{field}.scope", scope, _SCOPES))
    return causes


def validate_configuration(
    configuration: Mapping[str, Any], *, mutating: bool
) -> list[errors.FieldCause]:
    """Every error of a v1 Mutating/ValidatingWebhookConfiguration, with kube-apiserver's fields
    and wording (`webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be
    between 1 and 30 seconds`). Run after `default_configuration`; the server answers 422.
    """
    causes: list[errors.FieldCause] = []
    seen: set[str] = set()
    for index, hook in enumerate(configuration.get("webhooks") or []):
        field = f"webhooks[{index}]"
        if not isinstance(hook, dict):
            causes.append(errors.field_invalid(field, hook, "must be a webhook"))
            continue
        name = hook.get("name") or ""
        if not name:
            causes.append(errors.field_required(f"{field}.name", ""))
        elif len(str(name).split(".")) < 3:
            causes.append(
                errors.field_invalid(
                    f"{field}.name",
                    name,
                    "should be a domain with at least three segments separated by dots",
                )
            )
        elif name in seen:
            causes.append(errors.field_duplicate(f"{field}.name", name))
        seen.add(name)
        causes.extend(_validate_client_config(f"{field}.clientConfig", hook.get("clientConfig")))
        for rule_index, rule in enumerate(hook.get("rules") or []):
            causes.extend(_validate_rule(f"{field}.rules[{rule_index}]", rule))
        policy = hook.get("failurePolicy", "Fail")
        if policy not in ("Fail", "Ignore"):
            causes.append(_not_supported(f"{field}.failurePolicy", policy, ("Fail", "Ignore")))
        match_policy = hook.get("matchPolicy", "Equivalent")
        if match_policy not in ("Equivalent", "Exact"):
            causes.append(
                _not_supported(f"{field}.matchPolicy", match_policy, ("Equivalent", "Exact"))
            )
        side_effects = hook.get("sideEffects")
        if side_effects is None:
            causes.append(
                errors.field_required(
                    f"{field}.sideEffects", "must specify one of None, NoneOnDryRun"
                )
            )
        elif side_effects not in ("None", "NoneOnDryRun"):
            causes.append(
                _not_supported(f"{field}.sideEffects", side_effects, ("None", "NoneOnDryRun"))
            )
        timeout = hook.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 30:
            causes.append(
                errors.field_invalid(
                    f"{field}.timeoutSeconds",
                    timeout,
                    "the timeout value must be between 1 and 30 seconds",
                )
            )
        versions = hook.get("admissionReviewVersions") or []
        if not versions:
            causes.append(
                errors.field_required(
                    f"{field}.admissionReviewVersions", "must specify one of v1, v1beta1"
                )
            )
        elif not any(v in _REVIEW_VERSIONS for v in versions):
            causes.append(
                errors.field_invalid(
                    f"{field}.admissionReviewVersions",
                    versions,
                    "must include at least one of v1, v1beta1",
                )
            )
        if mutating:
            reinvocation = hook.get("reinvocationPolicy", "Never")
            if reinvocation not in ("Never", "IfNeeded"):
                causes.append(
                    _not_supported(
                        f"{field}.reinvocationPolicy", reinvocation, ("Never", "IfNeeded")
                    )
                )
        causes.extend(
            _validate_selector(f"{field}.namespaceSelector", hook.get("namespaceSelector"))
        )
        causes.extend(_validate_selector(f"{field}.objectSelector", hook.get("objectSelector")))
        causes.extend(
            _validate_match_conditions(f"{field}.matchConditions", hook.get("matchConditions"))
        )
    return causes


def _validate_match_conditions(field: str, conditions: Any) -> list[errors.FieldCause]:
    if conditions is None:
        return []
    if not isinstance(conditions, list):
        return [errors.field_invalid(field, conditions, "must be a list of match conditions")]
    causes = []
    if len(conditions) > cel.MAX_CONDITIONS:
        causes.append(
            errors.FieldCause(
                field,
                "FieldValueTooMany",
                f"must have at most {cel.MAX_CONDITIONS} items",
            )
        )
    seen: set[str] = set()
    for index, condition in enumerate(conditions):
        where = f"{field}[{index}]"
        name = condition.get("name") if isinstance(condition, dict) else None
        expression = condition.get("expression") if isinstance(condition, dict) else None
        if not name:
            causes.append(errors.field_required(f"{where}.name", ""))
        elif name in seen:
            causes.append(errors.field_duplicate(f"{where}.name", name))
        seen.add(str(name))
        if not expression:
            causes.append(errors.field_required(f"{where}.expression", ""))
        elif (problem := cel.compile_error(str(expression))) is not None:
            causes.append(
                errors.field_invalid(
                    f"{where}.expression", expression, f"compilation failed: {problem}"
                )
            )
    return causes


# --- Rules ------------------------------------------------------------------------------------


def _split_resource(text: str) -> tuple[str, str]:
    resource, _, subresource = text.partition("/")
    return resource, subresource


def rule_matches(rule: Mapping[str, Any], attrs: AdmissionAttributes) -> bool:
    """Whether one `RuleWithOperations` covers the request.

    Each list matches on an exact entry or `*`. A resource entry is `<resource>[/<subresource>]`
    with `*` allowed on either side, so `*` and `pods` cover no subresource, `*/*` and `pods/*`
    cover the resource and all its subresources, `*/status` every status subresource. `scope`
    `Namespaced` excludes cluster-scoped objects and Namespaces; `Cluster` covers exactly those;
    `*` (the default) covers both.
    """
    operations = rule.get("operations") or []
    if "*" not in operations and attrs.operation not in operations:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and attrs.version not in versions:
        return False
    for entry in rule.get("resources") or []:
        resource, subresource = _split_resource(entry)
        if resource in ("*", attrs.resource) and subresource in ("*", attrs.subresource):
            break
    else:
        return False
    scope = rule.get("scope") or "*"
    is_namespace = attrs.group == "" and attrs.resource == "namespaces"
    if scope == "Namespaced":
        return not is_namespace and attrs.namespace != ""
    if scope == "Cluster":
        return is_namespace or attrs.namespace == ""
    return True


# --- Webhooks ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Hook:
    """One webhook of one configuration, in dispatch order."""

    configuration: str
    index: int
    spec: dict
    mutating: bool

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def uid(self) -> str:
        """What reinvocation tracks: two configurations may hold webhooks of the same name."""
        return f"{self.configuration}/{self.index}"

    @property
    def ignore_failures(self) -> bool:
        return self.spec.get("failurePolicy", "Fail") == "Ignore"


class _CallError(Exception):
    """kube-apiserver's ErrCallingWebhook: the call failed; `failurePolicy` decides."""

    def __init__(self, hook: _Hook, reason: str) -> None:
        super().__init__(f'failed calling webhook "{hook.name}": {reason}')


class _Rejected(Exception):
    """A final answer that `failurePolicy` does not soften: a denial, a bad patch, no dry run."""

    def __init__(self, status: dict) -> None:
        super().__init__(status.get("message", ""))
        self.status = status


def _denial_status(hook_name: str, result: Mapping[str, Any] | None) -> dict:
    """`webhookerrors.ToStatusErr`: the webhook's Status, made a failure with a clear message."""
    status: dict[str, Any] = dict(result or {})
    denied_by = f'admission webhook "{hook_name}" denied the request'
    code = status.get("code")
    if not isinstance(code, int) or code < 400:
        status["code"] = 400
    if status.get("status") in (None, "", "Success"):
        status["status"] = "Failure"
    if status.get("message"):
        status["message"] = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        status["message"] = f"{denied_by}: {status['reason']}"
    else:
        status["message"] = f"{denied_by} without explanation"
    status["kind"] = "Status"
    status["apiVersion"] = "v1"
    status.setdefault("metadata", {})
    return status


def _go_error_text(exc: BaseException, host: str, port: int) -> str:
    """How Go's HTTP client would describe a transport failure, as far as Python can tell."""
    if isinstance(exc, TimeoutError):
        return "context deadline exceeded"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"tls: failed to verify certificate: x509: {exc.certificate_error}"
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"remote error: tls: {exc}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return f"dial tcp {host}:{port}: connect: connection refused"
        return f"dial tcp {host}:{port}: {exc.os_error}"
    return str(exc) or type(exc).__name__


def _request(attrs: AdmissionAttributes, *, uid: str | None) -> dict[str, Any]:
    """The AdmissionRequest of ``attrs``; without ``uid`` and the objects (None) it is the
    ``request`` that match conditions see."""
    resource = {"group": attrs.group, "version": attrs.version, "resource": attrs.resource}
    request: dict[str, Any] = {"uid": uid} if uid is not None else {}
    request |= {
        "kind": dict(attrs.kind),
        "resource": resource,
        "requestKind": dict(attrs.kind),
        "requestResource": dict(resource),
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
        request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    request["operation"] = attrs.operation
    request["userInfo"] = dict(attrs.user)
    if uid is not None:
        request["object"] = attrs.obj
        request["oldObject"] = attrs.old_obj
    request["dryRun"] = attrs.dry_run
    options_kind = _OPTIONS_KINDS.get(attrs.operation)
    if attrs.options is not None:
        request["options"] = {"apiVersion": "meta.k8s.io/v1", **attrs.options}
        if options_kind:
            request["options"]["kind"] = options_kind
    elif options_kind:
        request["options"] = {"apiVersion": "meta.k8s.io/v1", "kind": options_kind}
    return request


class Admission:
    """The admission chain of one API server. Safe to share between concurrent requests.

    `close()` releases the HTTP connections it keeps to webhooks (one pool per event loop);
    call it when the server stops.
    """

    def __init__(
        self,
        *,
        list_objects: ListObjectsFn,
        resolve_service: ResolveServiceFn | None = None,
    ) -> None:
        self._list_objects = list_objects
        self._resolve_service = resolve_service
        self._ssl_contexts: dict[str, ssl.SSLContext] = {}
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    async def close(self) -> None:
        """Close the connection pool of the running event loop (idempotent)."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    # --- the two phases ---

    async def mutate(self, attrs: AdmissionAttributes) -> tuple[dict | None, list[str]]:
        """Runs the mutating chain (with reinvocation); returns the possibly patched object and
        the warnings. Raises AdmissionDenied.

        Round 0 calls every matching webhook in order; each sees the object as patched so
        far. If a webhook changed the object, round 1 calls again, in order, the `IfNeeded`
        webhooks that ran before a change they did not see (a webhook not called in round 0 is
        never called in round 1). There is no round 2.
        """
        warnings: list[str] = []
        if attrs.resource in _EXEMPT_RESOURCES and attrs.group == ADMISSIONREGISTRATION:
            return attrs.obj, warnings
        hooks = self._hooks(MUTATING_PLURAL, mutating=True)
        # Never changed in place: a patch makes a new object (jsonpatch copies), so no copy here.
        obj = attrs.obj
        previously_invoked: set[str] = set()  # IfNeeded hooks called since the last change
        to_reinvoke: set[str] = set()
        reinvoke = False
        for round_ in (0, 1):
            if round_ == 1 and not reinvoke:
                break
            for hook in hooks:
                current = dataclasses.replace(attrs, obj=obj)
                if not self._should_call(hook, current):
                    continue
                if round_ == 1 and hook.uid not in to_reinvoke:
                    continue
                try:
                    patched = await self._call_mutating(hook, current, warnings)
                except _CallError as exc:
                    if hook.ignore_failures:
                        logger.warning(
                            "Failed calling webhook, failing open %s: %s", hook.name, exc
                        )
                        continue
                    raise AdmissionDenied(internal_error_status(str(exc))) from exc
                except _Rejected as exc:
                    raise AdmissionDenied(exc.status) from exc
                if patched is not None and patched != obj:
                    obj = patched
                    to_reinvoke |= previously_invoked
                    previously_invoked = set()
                    reinvoke = True
                if hook.spec.get("reinvocationPolicy") == "IfNeeded":
                    previously_invoked.add(hook.uid)
        return obj, _dedup(warnings)

    async def validate(self, attrs: AdmissionAttributes) -> list[str]:
        """Runs the validating webhooks (in parallel); returns warnings; raises AdmissionDenied.

        Every matching webhook is called even when one rejects early, as kube-apiserver does;
        the rejection reported is the first in configuration order.
        """
        if attrs.resource in _EXEMPT_RESOURCES and attrs.group == ADMISSIONREGISTRATION:
            return []
        hooks = [
            h for h in self._hooks(VALIDATING_PLURAL, mutating=False) if self._should_call(h, attrs)
        ]
        per_hook: list[list[str]] = [[] for _ in hooks]
        outcomes = await asyncio.gather(
            *(
                self._call_validating(hook, attrs, sink)
                for hook, sink in zip(hooks, per_hook, strict=True)
            ),
            return_exceptions=True,
        )
        warnings = [w for sink in per_hook for w in sink]
        for hook, outcome in zip(hooks, outcomes, strict=True):
            if outcome is None:
                continue
            if isinstance(outcome, _CallError):
                if hook.ignore_failures:
                    logger.warning(
                        "Failed calling webhook, failing open %s: %s", hook.name, outcome
                    )
                    continue
                raise AdmissionDenied(internal_error_status(str(outcome))) from outcome
            if isinstance(outcome, _Rejected):
                raise AdmissionDenied(outcome.status) from outcome
            raise outcome
        return _dedup(warnings)

    # --- selection ---

    def _hooks(self, plural: str, *, mutating: bool) -> list[_Hook]:
        configurations = self._list_objects(ADMISSIONREGISTRATION, "v1", plural)
        hooks: list[_Hook] = []
        for configuration in sorted(
            configurations, key=lambda c: c.get("metadata", {}).get("name", "")
        ):
            name = configuration.get("metadata", {}).get("name", "")
            for index, spec in enumerate(configuration.get("webhooks") or []):
                hooks.append(_Hook(configuration=name, index=index, spec=spec, mutating=mutating))
        return hooks

    def _should_call(self, hook: _Hook, attrs: AdmissionAttributes) -> bool:
        """`ShouldCallHook`: rules, then namespaceSelector, then objectSelector.

        A selector that cannot be evaluated fails the request (500) only when the rules match.
        """
        if not any(rule_matches(rule, attrs) for rule in hook.spec.get("rules") or []):
            return False
        try:
            namespace_selector = hook.spec.get("namespaceSelector")
            if namespace_selector:
                labels = self._namespace_labels(attrs)
                if labels is not None and not match_label_selector(namespace_selector, labels):
                    return False
            object_selector = hook.spec.get("objectSelector")
            if object_selector and not any(
                obj is not None
                and match_label_selector(
                    object_selector, (obj.get("metadata") or {}).get("labels") or {}
                )
                for obj in (attrs.obj, attrs.old_obj)
            ):
                return False
        except SelectorError as exc:
            message = f'webhook "{hook.name}" of {hook.configuration!r}: {exc}'
            raise AdmissionDenied(internal_error_status(message)) from exc
        decision = cel.evaluate(
            hook.spec.get("matchConditions") or [],
            obj=attrs.obj,
            old_obj=attrs.old_obj,
            request=_request(attrs, uid=None),
        )
        if decision.error:
            if hook.ignore_failures:
                logger.warning("webhook %s: match conditions failed: %s", hook.name, decision.error)
                return False
            # Forbidden on the object, not an internal error: the request is what failed.
            resource = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
            details = {"name": attrs.name, "group": attrs.group, "kind": attrs.resource}
            raise AdmissionDenied(
                _status(
                    403,
                    "Forbidden",
                    f'{resource} "{attrs.name}" is forbidden: {decision.error}',
                    **{k: v for k, v in details.items() if v},
                )
            )
        return decision.matches

    def _namespace_labels(self, attrs: AdmissionAttributes) -> Mapping[str, str] | None:
        """The labels a namespaceSelector sees, or None when it must not exclude the request.

        A Namespace's CREATE/UPDATE sees the Namespace's own new labels; any other request on
        a Namespace sees the stored one's; other cluster-scoped requests have no namespace and
        are never excluded (None); a missing namespace is 404, as the NamespaceLifecycle plugin
        that runs before webhooks answers.
        """
        is_namespace = attrs.group == "" and attrs.resource == "namespaces"
        if is_namespace and attrs.subresource == "" and attrs.operation in ("CREATE", "UPDATE"):
            return ((attrs.obj or {}).get("metadata") or {}).get("labels") or {}
        namespace = attrs.name if is_namespace else attrs.namespace
        if not namespace:
            return None
        for candidate in self._list_objects("", "v1", "namespaces"):
            metadata = candidate.get("metadata") or {}
            if metadata.get("name") == namespace:
                return metadata.get("labels") or {}
        raise AdmissionDenied(
            _status(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                name=namespace,
                kind="namespaces",
            )
        )

    # --- calls ---

    def _ssl_context(self, ca_bundle: str) -> ssl.SSLContext:
        context = self._ssl_contexts.get(ca_bundle)
        if context is None:
            if ca_bundle:
                context = certs.client_ssl_context(ca_bundle)
            else:
                context = ssl.create_default_context()
                context.hostname_checks_common_name = False
            self._ssl_contexts[ca_bundle] = context
        return context

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
            self._sessions[loop] = session
        return session

    def _build_review(self, hook: _Hook, attrs: AdmissionAttributes) -> dict:
        accepted = hook.spec.get("admissionReviewVersions") or []
        version = next((v for v in accepted if v in _REVIEW_VERSIONS), None)
        if version is None:
            raise _CallError(
                hook,
                "could not create admission objects: webhook does not accept known "
                "AdmissionReview versions (v1, v1beta1)",
            )
        return {
            "apiVersion": f"admission.k8s.io/{version}",
            "kind": "AdmissionReview",
            "request": _request(attrs, uid=str(uuid.uuid4())),
        }

    def _check_dry_run(self, hook: _Hook, attrs: AdmissionAttributes) -> None:
        if not attrs.dry_run:
            return
        side_effects = hook.spec.get("sideEffects")
        if side_effects is None:
            raise _CallError(hook, "Webhook SideEffects is nil")
        if side_effects not in ("None", "NoneOnDryRun"):
            raise _Rejected(
                _status(
                    400, "BadRequest", f'admission webhook "{hook.name}" does not support dry run'
                )
            )

    def _endpoint(self, hook: _Hook) -> tuple[str, str, str | None, int]:
        """(URL as kube-apiserver names it, URL to connect to, TLS server name, timeout)."""
        config = hook.spec.get("clientConfig") or {}
        timeout = int(hook.spec.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)
        suffix = f"timeout={timeout}s"
        if config.get("url"):
            url = str(config["url"])
            named = f"{url}{'&' if '?' in url else '?'}{suffix}"
            return named, named, None, timeout
        service = config.get("service") or {}
        name, namespace = service.get("name", ""), service.get("namespace", "")
        port = int(service.get("port") or 443)
        path = service.get("path") or ""
        server_name = f"{name}.{namespace}.svc"
        named = f"https://{server_name}:{port}{path}?{suffix}"
        if self._resolve_service is None:
            raise _CallError(
                hook,
                f'failed to call webhook: Post "{named}": '
                f"dial tcp: lookup {server_name}: no such host",
            )
        try:
            host, local_port = self._resolve_service(namespace, name, port)
        except Exception as exc:  # the test's resolver refuses: the Service has no endpoints
            raise _CallError(
                hook, f'failed to call webhook: Post "{named}": service "{namespace}/{name}": {exc}'
            ) from exc
        return named, f"https://{host}:{local_port}{path}?{suffix}", server_name, timeout

    async def _post(self, hook: _Hook, review: dict) -> dict:
        """POST the review; return the decoded AdmissionReview. Raises _CallError."""
        named, target, server_name, timeout = self._endpoint(hook)
        if not target.startswith("https://"):
            raise _CallError(
                hook, f'failed to call webhook: Post "{named}": webhook URL must use https'
            )
        try:
            context = self._ssl_context(
                str((hook.spec.get("clientConfig") or {}).get("caBundle") or "")
            )
        except ValueError as exc:
            raise _CallError(hook, f"could not get REST client: {exc}") from exc
        url = yarl.URL(target)
        try:
            async with asyncio.timeout(timeout):
                async with self._session().post(
                    url,
                    json=review,
                    ssl=context,
                    server_hostname=server_name,
                    headers={"Accept": "application/json, */*"},
                ) as response:
                    body = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            text = _go_error_text(exc, url.host or "", url.port or 443)
            raise _CallError(hook, f'failed to call webhook: Post "{named}": {text}') from exc
        if not 200 <= response.status < 300:
            snippet = body[:200].decode("utf-8", errors="replace")
            raise _CallError(
                hook,
                f"failed to call webhook: an error on the server ({snippet!r}) has prevented the "
                f"request from succeeding (HTTP {response.status})",
            )
        try:
            decoded = json.loads(body)
        except ValueError as exc:
            raise _CallError(
                hook, f"failed to call webhook: couldn't get version/kind; json parse error: {exc}"
            ) from exc
        if not isinstance(decoded, dict):
            raise _CallError(
                hook,
                "failed to call webhook: couldn't get version/kind; "
                "json parse error: not an object",
            )
        return decoded

    def _verify(self, hook: _Hook, review: dict, answer: dict) -> dict:
        """`VerifyAdmissionResponse`: the response block, or _CallError if it is not valid."""
        invalid = "received invalid webhook response: "
        response = answer.get("response")
        if not isinstance(response, dict):
            raise _CallError(hook, invalid + "webhook response was absent")
        expected_uid = review["request"]["uid"]
        if response.get("uid") != expected_uid:
            raise _CallError(
                hook,
                invalid
                + f'expected response.uid="{expected_uid}", got "{response.get("uid", "")}"',
            )
        expected = (review["apiVersion"], "AdmissionReview")
        got = (answer.get("apiVersion", ""), answer.get("kind", ""))
        if got != expected:
            raise _CallError(
                hook,
                invalid + f"expected webhook response of {expected[0]}, Kind={expected[1]}, "
                f"got {got[0]}, Kind={got[1]}",
            )
        patch, patch_type = response.get("patch"), response.get("patchType")
        if hook.mutating:
            if patch and patch_type is None:
                raise _CallError(
                    hook, invalid + "webhook returned response.patch but not response.patchType"
                )
            if patch_type is not None and not patch:
                raise _CallError(
                    hook, invalid + "webhook returned response.patchType but not response.patch"
                )
            if patch_type == "":
                raise _CallError(
                    hook, invalid + 'webhook returned invalid response.patchType of ""'
                )
        else:
            if patch:
                raise _CallError(hook, invalid + "validating webhook may not return response.patch")
            if patch_type is not None:
                raise _CallError(
                    hook, invalid + "validating webhook may not return response.patchType"
                )
        return response

    async def _call(self, hook: _Hook, attrs: AdmissionAttributes, warnings: list[str]) -> dict:
        """Call one webhook; collect its warnings; return its verified response if it allowed."""
        self._check_dry_run(hook, attrs)
        review = self._build_review(hook, attrs)
        answer = await self._post(hook, review)
        response = self._verify(hook, review, answer)
        warnings.extend(str(w) for w in response.get("warnings") or [])
        if response.get("allowed") is not True:
            raise _Rejected(_denial_status(hook.name, response.get("status")))
        return response

    async def _call_validating(
        self, hook: _Hook, attrs: AdmissionAttributes, warnings: list[str]
    ) -> None:
        await self._call(hook, attrs, warnings)

    async def _call_mutating(
        self, hook: _Hook, attrs: AdmissionAttributes, warnings: list[str]
    ) -> dict | None:
        """Call a mutating webhook; return the patched object, or None when it sent no patch."""
        response = await self._call(hook, attrs, warnings)
        encoded = response.get("patch")
        if not encoded:
            return None
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError, TypeError) as exc:
            raise _CallError(
                hook, f"failed to call webhook: response.patch: illegal base64 data: {exc}"
            ) from exc
        try:
            operations = json.loads(raw)
        except ValueError as exc:
            raise _Rejected(
                internal_error_status(f"invalid JSON patch from webhook {hook.name!r}: {exc}")
            ) from exc
        if not isinstance(operations, list):
            raise _Rejected(
                internal_error_status(f"invalid JSON patch from webhook {hook.name!r}: not a list")
            )
        if not operations:
            return None
        if attrs.obj is None:
            raise _Rejected(
                internal_error_status(
                    f'admission webhook "{hook.name}" attempted to modify the object, which is not '
                    "supported for this operation"
                )
            )
        if response.get("patchType") != "JSONPatch":
            raise _CallError(hook, f'unsupported patch type "{response.get("patchType")}"')
        try:
            patched = jsonpatch.JsonPatch(operations).apply(attrs.obj, in_place=False)
        except (
            jsonpatch.JsonPatchException,
            jsonpatch.JsonPointerException,
            TypeError,
            KeyError,
        ) as exc:
            raise _Rejected(
                internal_error_status(f"JSON patch from webhook {hook.name!r}: {exc}")
            ) from exc
        if not isinstance(patched, dict):
            raise _Rejected(
                internal_error_status(
                    f"JSON patch from webhook {hook.name!r}: the object is not an object"
                )
            )
        return patched


def _dedup(warnings: Sequence[str]) -> list[str]:
    """Drop repeated warnings, keeping the first occurrence (kube-apiserver's recorder does)."""
    seen: set[str] = set()
    kept = []
    for warning in warnings:
        if warning not in seen:
            seen.add(warning)
            kept.append(warning)
    return kept
