"""Pure parts of kubesim admission: rule matching, label selectors, Warning headers."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

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


class RuleCase(NamedTuple):
    rule: Any
    overrides: Any
    expected: Any


RULE_CASES = {
    "an exact rule matches its own request": RuleCase(
        rule=make_rule(), overrides={}, expected=True
    ),
    "another operation is not matched": RuleCase(
        rule=make_rule(), overrides={"operation": "UPDATE"}, expected=False
    ),
    "operation * matches UPDATE": RuleCase(
        rule=make_rule(operations=["*"]), overrides={"operation": "UPDATE"}, expected=True
    ),
    "operation * matches CONNECT": RuleCase(
        rule=make_rule(operations=["*"]), overrides={"operation": "CONNECT"}, expected=True
    ),
    "a list of operations matches any member": RuleCase(
        rule=make_rule(operations=["UPDATE", "DELETE"]),
        overrides={"operation": "DELETE"},
        expected=True,
    ),
    "another group is not matched": RuleCase(
        rule=make_rule(apiGroups=["apps"]), overrides={}, expected=False
    ),
    "group * matches the core group": RuleCase(
        rule=make_rule(apiGroups=["*"]), overrides={}, expected=True
    ),
    "group * matches a named group": RuleCase(
        rule=make_rule(apiGroups=["*"], apiVersions=["*"], resources=["*"]),
        overrides={"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "queues"},
        expected=True,
    ),
    "another version is not matched": RuleCase(
        rule=make_rule(apiVersions=["v1beta1"]), overrides={}, expected=False
    ),
    "version * matches v1": RuleCase(
        rule=make_rule(apiVersions=["*"]), overrides={}, expected=True
    ),
    "another resource is not matched": RuleCase(
        rule=make_rule(resources=["configmaps"]), overrides={}, expected=False
    ),
    "resource * matches pods": RuleCase(
        rule=make_rule(resources=["*"]), overrides={}, expected=True
    ),
    "resource * does not match a subresource": RuleCase(
        rule=make_rule(resources=["*"]), overrides=EVICTION, expected=False
    ),
    "resource pods does not match pods/eviction": RuleCase(
        rule=make_rule(resources=["pods"]), overrides=EVICTION, expected=False
    ),
    "resource */* matches a subresource": RuleCase(
        rule=make_rule(resources=["*/*"]), overrides=EVICTION, expected=True
    ),
    "resource */* matches the main resource": RuleCase(
        rule=make_rule(resources=["*/*"]), overrides={}, expected=True
    ),
    "resource pods/* matches pods/eviction": RuleCase(
        rule=make_rule(resources=["pods/*"]), overrides=EVICTION, expected=True
    ),
    "resource pods/* matches pods itself": RuleCase(
        rule=make_rule(resources=["pods/*"]), overrides={}, expected=True
    ),
    "resource pods/eviction matches only that subresource": RuleCase(
        rule=make_rule(resources=["pods/eviction"]),
        overrides={"subresource": "binding"},
        expected=False,
    ),
    "resource pods/eviction matches the eviction": RuleCase(
        rule=make_rule(resources=["pods/eviction"]),
        overrides=EVICTION,
        expected=True,
    ),
    "resource pods/eviction does not match pods": RuleCase(
        rule=make_rule(resources=["pods/eviction"]),
        overrides={},
        expected=False,
    ),
    "resource */status matches pods/status": RuleCase(
        rule=make_rule(resources=["*/status"], operations=["UPDATE"]),
        overrides={"operation": "UPDATE", "subresource": "status"},
        expected=True,
    ),
    "resource */status does not match pods": RuleCase(
        rule=make_rule(resources=["*/status"]), overrides={}, expected=False
    ),
    "scope Namespaced matches a namespaced object": RuleCase(
        rule=make_rule(scope="Namespaced"), overrides={}, expected=True
    ),
    "scope Namespaced excludes a cluster-scoped object": RuleCase(
        rule=make_rule(scope="Namespaced", resources=["*"]),
        overrides=NODE,
        expected=False,
    ),
    "scope Namespaced excludes Namespaces themselves": RuleCase(
        rule=make_rule(scope="Namespaced", resources=["*"]),
        overrides={**NAMESPACE, "namespace": "team-a"},
        expected=False,
    ),
    "scope Cluster matches a Namespace": RuleCase(
        rule=make_rule(scope="Cluster", resources=["namespaces"]),
        overrides=NAMESPACE,
        expected=True,
    ),
    "scope Cluster matches a Node": RuleCase(
        rule=make_rule(scope="Cluster", resources=["nodes"]), overrides=NODE, expected=True
    ),
    "scope Cluster excludes a namespaced object": RuleCase(
        rule=make_rule(scope="Cluster"), overrides={}, expected=False
    ),
    "scope * matches both": RuleCase(
        rule=make_rule(scope="*", resources=["nodes"]), overrides=NODE, expected=True
    ),
    "an empty operations list matches nothing": RuleCase(
        rule=make_rule(operations=[]), overrides={}, expected=False
    ),
}


@pytest.mark.parametrize(
    ("rule", "overrides", "expected"), RULE_CASES.values(), ids=RULE_CASES.keys()
)
def test_a_rule_matches_requests_as_kube_apiserver_does(
    rule: dict[str, Any], overrides: dict[str, Any], expected: bool
) -> None:
    assert admission.rule_matches(rule, make_attrs(**overrides)) is expected


class SelectorCase(NamedTuple):
    selector: Any
    labels: Any
    expected: Any


SELECTOR_CASES = {
    "no selector matches anything": SelectorCase(selector=None, labels={}, expected=True),
    "an empty selector matches anything": SelectorCase(
        selector={}, labels={"a": "1"}, expected=True
    ),
    "matchLabels match equal values": SelectorCase(
        selector={"matchLabels": {"a": "1"}}, labels={"a": "1", "b": "2"}, expected=True
    ),
    "matchLabels fail on a different value": SelectorCase(
        selector={"matchLabels": {"a": "1"}}, labels={"a": "2"}, expected=False
    ),
    "matchLabels fail on a missing key": SelectorCase(
        selector={"matchLabels": {"a": "1"}}, labels={}, expected=False
    ),
    "In holds for a listed value": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
        labels={"a": "2"},
        expected=True,
    ),
    "In fails for an unlisted value": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]},
        labels={"a": "3"},
        expected=False,
    ),
    "In fails for a missing key": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]},
        labels={},
        expected=False,
    ),
    "NotIn holds for a missing key": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
        labels={},
        expected=True,
    ),
    "NotIn fails for a listed value": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
        labels={"a": "1"},
        expected=False,
    ),
    "Exists holds for a present key with an empty value": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        labels={"a": ""},
        expected=True,
    ),
    "Exists fails for a missing key": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        labels={},
        expected=False,
    ),
    "DoesNotExist holds for a missing key": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]},
        labels={"b": "1"},
        expected=True,
    ),
    "DoesNotExist fails for a present key": SelectorCase(
        selector={"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]},
        labels={"a": "1"},
        expected=False,
    ),
    "labels and expressions must all hold": SelectorCase(
        selector={
            "matchLabels": {"a": "1"},
            "matchExpressions": [{"key": "b", "operator": "Exists"}],
        },
        labels={"a": "1"},
        expected=False,
    ),
}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"), SELECTOR_CASES.values(), ids=SELECTOR_CASES.keys()
)
def test_a_label_selector_matches_as_metav1_defines_it(
    selector: dict[str, Any] | None, labels: dict[str, Any], expected: bool
) -> None:
    assert admission.match_label_selector(selector, labels) is expected


class BadSelectorCase(NamedTuple):
    expression: Any
    message: Any


BAD_SELECTOR_CASES = {
    "an unknown operator": BadSelectorCase(
        expression={"key": "a", "operator": "Gt", "values": ["1"]},
        message="matchExpressions[0] (key 'a'): unknown operator 'Gt'",
    ),
    "In without values": BadSelectorCase(
        expression={"key": "a", "operator": "In"},
        message="matchExpressions[0] (key 'a'): operator In needs values, got none",
    ),
    "Exists with values": BadSelectorCase(
        expression={"key": "a", "operator": "Exists", "values": ["x"]},
        message="matchExpressions[0] (key 'a'): operator Exists takes no values, got ['x']",
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


class WarningCase(NamedTuple):
    text: Any
    header: Any


WARNING_CASES = {
    "plain text is quoted": WarningCase(
        text="pod uses a deprecated field", header='299 - "pod uses a deprecated field"'
    ),
    "quotes are escaped": WarningCase(text='the "x" gate', header='299 - "the \\"x\\" gate"'),
    "backslashes are escaped": WarningCase(text="a\\b", header='299 - "a\\\\b"'),
    "line breaks become spaces": WarningCase(text="one\ntwo", header='299 - "one two"'),
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


class ValidationCase(NamedTuple):
    webhooks: Any
    expected: Any


VALIDATION_CASES = {
    "a valid webhook has no errors": ValidationCase(webhooks=[valid_webhook()], expected=[]),
    "a timeout above 30 seconds": ValidationCase(
        webhooks=[valid_webhook(timeoutSeconds=31)],
        expected=[
            "webhooks[0].timeoutSeconds: Invalid value: 31: "
            "the timeout value must be between 1 and 30 seconds"
        ],
    ),
    "a timeout of 0": ValidationCase(
        webhooks=[valid_webhook(timeoutSeconds=0)],
        expected=[
            "webhooks[0].timeoutSeconds: Invalid value: 0: "
            "the timeout value must be between 1 and 30 seconds"
        ],
    ),
    "a name with two segments": ValidationCase(
        webhooks=[valid_webhook(name="queuetree.io")],
        expected=[
            'webhooks[0].name: Invalid value: "queuetree.io": '
            "should be a domain with at least three segments separated by dots"
        ],
    ),
    "a duplicate name": ValidationCase(
        webhooks=[valid_webhook(), valid_webhook()],
        expected=['webhooks[1].name: Duplicate value: "pods.queuetree.io"'],
    ),
    "side effects Some": ValidationCase(
        webhooks=[valid_webhook(sideEffects="Some")],
        expected=[
            'webhooks[0].sideEffects: Unsupported value: "Some": '
            'supported values: "None", "NoneOnDryRun"'
        ],
    ),
    "no side effects": ValidationCase(
        webhooks=[{k: v for k, v in valid_webhook().items() if k != "sideEffects"}],
        expected=[
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"
        ],
    ),
    "no review versions": ValidationCase(
        webhooks=[valid_webhook(admissionReviewVersions=[])],
        expected=[
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"
        ],
    ),
    "both url and service": ValidationCase(
        webhooks=[
            valid_webhook(
                clientConfig={"url": "https://a.b/c", "service": {"namespace": "n", "name": "s"}}
            )
        ],
        expected=[
            "webhooks[0].clientConfig: Required value: exactly one of url or service is required"
        ],
    ),
    "a plain http url": ValidationCase(
        webhooks=[valid_webhook(clientConfig={"url": "http://127.0.0.1:8443/x"})],
        expected=[
            'webhooks[0].clientConfig.url: Invalid value: "http://127.0.0.1:8443/x": '
            "'https' is the only allowed URL scheme"
        ],
    ),
    "an unknown failure policy and operation": ValidationCase(
        webhooks=[
            valid_webhook(
                failurePolicy="Retry", rules=[make_rule(operations=["PATCH"], scope="Global")]
            )
        ],
        expected=[
            'webhooks[0].rules[0].operations[0]: Unsupported value: "PATCH": '
            'supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"',
            'webhooks[0].rules[0].scope: Unsupported value: "Global": '
            'supported values: "*", "Cluster", "Namespaced"',
            'webhooks[0].failurePolicy: Unsupported value: "Retry": '
            'supported values: "Fail", "Ignore"',
        ],
    ),
    "a selector with an unknown operator": ValidationCase(
        webhooks=[
            valid_webhook(objectSelector={"matchExpressions": [{"key": "a", "operator": "Gt"}]})
        ],
        expected=[
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
