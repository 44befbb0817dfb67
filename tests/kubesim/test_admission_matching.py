"""Pure parts of kubesim admission: rule matching, label selectors, Warning headers."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubesim import admission


def make_attrs(**overrides: object) -> admission.AdmissionAttributes:
    base = admission.AdmissionAttributes(
        operation="CREATE",
        group="",
        version="v1",
        resource="pods",
        subresource="",
        kind={"group": "", "version": "v1", "kind": "Pod"},
        name="p1",
        namespace="default",
        user={"username": "kubernetes-admin", "groups": ["system:masters"]},
        obj={"metadata": {"name": "p1", "namespace": "default"}},
        old_obj=None,
        dry_run=False,
        options=None,
    )
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


def make_rule(**overrides: object) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
    }
    rule.update(overrides)
    return rule


EVICTION = {"operation": "CREATE", "subresource": "eviction"}
NAMESPACE = {"resource": "namespaces", "name": "team-a", "namespace": ""}
NODE = {"resource": "nodes", "name": "n1", "namespace": ""}

RULE_CASES = {
    "an exact rule matches its own request": (make_rule(), {}, True),
    "another operation is not matched": (make_rule(), {"operation": "UPDATE"}, False),
    "operation * matches UPDATE": (make_rule(operations=["*"]), {"operation": "UPDATE"}, True),
    "operation * matches CONNECT": (make_rule(operations=["*"]), {"operation": "CONNECT"}, True),
    "a list of operations matches any member": (
        make_rule(operations=["UPDATE", "DELETE"]),
        {"operation": "DELETE"},
        True,
    ),
    "another group is not matched": (make_rule(apiGroups=["apps"]), {}, False),
    "group * matches the core group": (make_rule(apiGroups=["*"]), {}, True),
    "group * matches a named group": (
        make_rule(apiGroups=["*"], apiVersions=["*"], resources=["*"]),
        {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "queues"},
        True,
    ),
    "another version is not matched": (make_rule(apiVersions=["v1beta1"]), {}, False),
    "version * matches v1": (make_rule(apiVersions=["*"]), {}, True),
    "another resource is not matched": (make_rule(resources=["configmaps"]), {}, False),
    "resource * matches pods": (make_rule(resources=["*"]), {}, True),
    "resource * does not match a subresource": (make_rule(resources=["*"]), EVICTION, False),
    "resource pods does not match pods/eviction": (make_rule(resources=["pods"]), EVICTION, False),
    "resource */* matches a subresource": (make_rule(resources=["*/*"]), EVICTION, True),
    "resource */* matches the main resource": (make_rule(resources=["*/*"]), {}, True),
    "resource pods/* matches pods/eviction": (make_rule(resources=["pods/*"]), EVICTION, True),
    "resource pods/* matches pods itself": (make_rule(resources=["pods/*"]), {}, True),
    "resource pods/eviction matches only that subresource": (
        make_rule(resources=["pods/eviction"]),
        {"subresource": "binding"},
        False,
    ),
    "resource pods/eviction matches the eviction": (
        make_rule(resources=["pods/eviction"]),
        EVICTION,
        True,
    ),
    "resource pods/eviction does not match pods": (
        make_rule(resources=["pods/eviction"]),
        {},
        False,
    ),
    "resource */status matches pods/status": (
        make_rule(resources=["*/status"], operations=["UPDATE"]),
        {"operation": "UPDATE", "subresource": "status"},
        True,
    ),
    "resource */status does not match pods": (make_rule(resources=["*/status"]), {}, False),
    "scope Namespaced matches a namespaced object": (make_rule(scope="Namespaced"), {}, True),
    "scope Namespaced excludes a cluster-scoped object": (
        make_rule(scope="Namespaced", resources=["*"]),
        NODE,
        False,
    ),
    "scope Namespaced excludes Namespaces themselves": (
        make_rule(scope="Namespaced", resources=["*"]),
        {**NAMESPACE, "namespace": "team-a"},
        False,
    ),
    "scope Cluster matches a Namespace": (
        make_rule(scope="Cluster", resources=["namespaces"]),
        NAMESPACE,
        True,
    ),
    "scope Cluster matches a Node": (make_rule(scope="Cluster", resources=["nodes"]), NODE, True),
    "scope Cluster excludes a namespaced object": (make_rule(scope="Cluster"), {}, False),
    "scope * matches both": (make_rule(scope="*", resources=["nodes"]), NODE, True),
    "an empty operations list matches nothing": (make_rule(operations=[]), {}, False),
}


@pytest.mark.parametrize(
    ("rule", "overrides", "expected"), RULE_CASES.values(), ids=RULE_CASES.keys()
)
def test_a_rule_matches_requests_as_kube_apiserver_does(
    rule: dict[str, Any], overrides: dict[str, Any], expected: bool
) -> None:
    assert admission.rule_matches(rule, make_attrs(**overrides)) is expected


SELECTOR_CASES = {
    "no selector matches anything": (None, {}, True),
    "an empty selector matches anything": ({}, {"a": "1"}, True),
    "matchLabels match equal values": ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    "matchLabels fail on a different value": ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    "matchLabels fail on a missing key": ({"matchLabels": {"a": "1"}}, {}, False),
    "In holds for a listed value": (
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
        {"a": "2"},
        True,
    ),
    "In fails for an unlisted value": (
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]},
        {"a": "3"},
        False,
    ),
    "In fails for a missing key": (
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]},
        {},
        False,
    ),
    "NotIn holds for a missing key": (
        {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
        {},
        True,
    ),
    "NotIn fails for a listed value": (
        {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
        {"a": "1"},
        False,
    ),
    "Exists holds for a present key with an empty value": (
        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        {"a": ""},
        True,
    ),
    "Exists fails for a missing key": (
        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        {},
        False,
    ),
    "DoesNotExist holds for a missing key": (
        {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]},
        {"b": "1"},
        True,
    ),
    "DoesNotExist fails for a present key": (
        {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]},
        {"a": "1"},
        False,
    ),
    "labels and expressions must all hold": (
        {
            "matchLabels": {"a": "1"},
            "matchExpressions": [{"key": "b", "operator": "Exists"}],
        },
        {"a": "1"},
        False,
    ),
}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"), SELECTOR_CASES.values(), ids=SELECTOR_CASES.keys()
)
def test_a_label_selector_matches_as_metav1_defines_it(
    selector: dict[str, Any] | None, labels: dict[str, Any], expected: bool
) -> None:
    assert admission.match_label_selector(selector, labels) is expected


BAD_SELECTOR_CASES = {
    "an unknown operator": (
        {"key": "a", "operator": "Gt", "values": ["1"]},
        "matchExpressions[0] (key 'a'): unknown operator 'Gt'",
    ),
    "In without values": (
        {"key": "a", "operator": "In"},
        "matchExpressions[0] (key 'a'): operator In needs values, got none",
    ),
    "Exists with values": (
        {"key": "a", "operator": "Exists", "values": ["x"]},
        "matchExpressions[0] (key 'a'): operator Exists takes no values, got ['x']",
    ),
}


@pytest.mark.parametrize(
    ("expression", "message"), BAD_SELECTOR_CASES.values(), ids=BAD_SELECTOR_CASES.keys()
)
def test_an_invalid_selector_is_an_error_naming_the_expression(
    expression: dict[str, Any], message: str
) -> None:
    with pytest.raises(admission.SelectorError) as caught:
        admission.match_label_selector({"matchExpressions": [expression]}, {"a": "1"})
    assert str(caught.value) == message


WARNING_CASES = {
    "plain text is quoted": ("pod uses a deprecated field", '299 - "pod uses a deprecated field"'),
    "quotes are escaped": ('the "x" gate', '299 - "the \\"x\\" gate"'),
    "backslashes are escaped": ("a\\b", '299 - "a\\\\b"'),
    "line breaks become spaces": ("one\ntwo", '299 - "one two"'),
}


@pytest.mark.parametrize(("text", "header"), WARNING_CASES.values(), ids=WARNING_CASES.keys())
def test_a_warning_becomes_a_299_header_value(text: str, header: str) -> None:
    assert admission.warning_header(text) == header


def valid_webhook(**overrides: Any) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": "pods.queuetree.io",
        "clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/mutate"}},
        "rules": [make_rule()],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    hook.update(overrides)
    return hook


def test_defaults_fill_what_kube_apiserver_fills() -> None:
    configuration = {"webhooks": [valid_webhook()]}

    admission.default_configuration(configuration, mutating=True)

    assert configuration == {
        "webhooks": [
            {
                "name": "pods.queuetree.io",
                "clientConfig": {
                    "service": {"namespace": "ns", "name": "svc", "path": "/mutate", "port": 443}
                },
                "rules": [{**make_rule(), "scope": "*"}],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "namespaceSelector": {},
                "objectSelector": {},
                "timeoutSeconds": 10,
                "reinvocationPolicy": "Never",
            }
        ]
    }


def test_validating_configurations_get_no_reinvocation_policy() -> None:
    configuration = {"webhooks": [valid_webhook()]}
    admission.default_configuration(configuration, mutating=False)
    assert "reinvocationPolicy" not in configuration["webhooks"][0]


def rendered(causes: list[Any]) -> list[str]:
    return [f"{c.field}: {c.message}" for c in causes]


VALIDATION_CASES = {
    "a valid webhook has no errors": ([valid_webhook()], []),
    "a timeout above 30 seconds": (
        [valid_webhook(timeoutSeconds=31)],
        [
            "webhooks[0].timeoutSeconds: Invalid value: 31: "
            "the timeout value must be between 1 and 30 seconds"
        ],
    ),
    "a timeout of 0": (
        [valid_webhook(timeoutSeconds=0)],
        [
            "webhooks[0].timeoutSeconds: Invalid value: 0: "
            "the timeout value must be between 1 and 30 seconds"
        ],
    ),
    "a name with two segments": (
        [valid_webhook(name="queuetree.io")],
        [
            'webhooks[0].name: Invalid value: "queuetree.io": '
            "should be a domain with at least three segments separated by dots"
        ],
    ),
    "a duplicate name": (
        [valid_webhook(), valid_webhook()],
        ['webhooks[1].name: Duplicate value: "pods.queuetree.io"'],
    ),
    "side effects Some": (
        [valid_webhook(sideEffects="Some")],
        [
            'webhooks[0].sideEffects: Unsupported value: "Some": '
            'supported values: "None", "NoneOnDryRun"'
        ],
    ),
    "no side effects": (
        [{k: v for k, v in valid_webhook().items() if k != "sideEffects"}],
        ["webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"],
    ),
    "no review versions": (
        [valid_webhook(admissionReviewVersions=[])],
        ["webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"],
    ),
    "both url and service": (
        [
            valid_webhook(
                clientConfig={"url": "https://a.b/c", "service": {"namespace": "n", "name": "s"}}
            )
        ],
        ["webhooks[0].clientConfig: Required value: exactly one of url or service is required"],
    ),
    "a plain http url": (
        [valid_webhook(clientConfig={"url": "http://127.0.0.1:8443/x"})],
        [
            'webhooks[0].clientConfig.url: Invalid value: "http://127.0.0.1:8443/x": '
            "'https' is the only allowed URL scheme"
        ],
    ),
    "an unknown failure policy and operation": (
        [
            valid_webhook(
                failurePolicy="Retry", rules=[make_rule(operations=["PATCH"], scope="Global")]
            )
        ],
        [
            'webhooks[0].rules[0].operations[0]: Unsupported value: "PATCH": '
            'supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"',
            'webhooks[0].rules[0].scope: Unsupported value: "Global": '
            'supported values: "*", "Cluster", "Namespaced"',
            'webhooks[0].failurePolicy: Unsupported value: "Retry": '
            'supported values: "Fail", "Ignore"',
        ],
    ),
    "a selector with an unknown operator": (
        [valid_webhook(objectSelector={"matchExpressions": [{"key": "a", "operator": "Gt"}]})],
        [
            'webhooks[0].objectSelector.matchExpressions[0].operator: Invalid value: "Gt": '
            "not a valid selector operator"
        ],
    ),
}


@pytest.mark.parametrize(
    ("webhooks", "expected"), VALIDATION_CASES.values(), ids=VALIDATION_CASES.keys()
)
def test_a_configuration_is_validated_with_kube_apiservers_fields_and_words(
    webhooks: list[dict[str, Any]], expected: list[str]
) -> None:
    configuration = {"webhooks": webhooks}
    assert rendered(admission.validate_configuration(configuration, mutating=True)) == expected


def test_an_unknown_reinvocation_policy_is_refused_on_mutating_webhooks_only() -> None:
    configuration = {"webhooks": [valid_webhook(reinvocationPolicy="Always")]}
    assert rendered(admission.validate_configuration(configuration, mutating=True)) == [
        'webhooks[0].reinvocationPolicy: Unsupported value: "Always": '
        'supported values: "Never", "IfNeeded"'
    ]
