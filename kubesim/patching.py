"""The four PATCH content types: JSON patch, merge patch, strategic merge patch and apply.

Each function takes the current object (a private copy the caller may mutate) and the decoded
patch body, and returns the patched object. Failures are `errors.ApiError`s with the codes of
kube-apiserver: a body of the wrong shape is 400; a JSON patch whose `test` fails, or whose path
does not exist, is 422 (kopf relies on that to detect concurrent changes).

Strategic merge uses a fixed table of merge keys (the built-in fields listed in kubesim-spec
§2.5); lists without a merge key are replaced, as upstream does for atomic lists.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer

from kubesim import errors

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"

PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)


def _unprocessable(detail: str) -> errors.ApiError:
    return errors.ApiError(
        422,
        "Invalid",
        message=f"the server rejected our request due to an error in our request: {detail}",
    )


def apply_json_patch(target: dict, ops: Any) -> dict:
    """RFC 6902; a non-list body is 400, a failed operation 422."""
    if not isinstance(ops, list):
        raise errors.bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    try:
        patch = jsonpatch.JsonPatch(ops)
        result = patch.apply(target, in_place=True)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise _unprocessable(f"testing value failed: {exc}") from exc
    except (jsonpatch.JsonPatchConflict, jsonpointer.JsonPointerException) as exc:
        raise _unprocessable(str(exc)) from exc
    except jsonpatch.InvalidJsonPatch as exc:
        raise errors.bad_request(f"invalid JSON patch: {exc}") from exc
    if not isinstance(result, dict):
        raise _unprocessable("the patched document is not an object")
    return result


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            target[key] = apply_merge_patch(target.get(key), value)
        else:
            target[key] = copy.deepcopy(value) if isinstance(value, list) else value
    return target


# Merge keys by field name (kubesim-spec §2.5). `ports` depends on where it is: container ports
# merge by containerPort, service ports by port.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "addresses": "type",
    "readinessGates": "conditionType",
    "resourceClaims": "name",
}
# Primitive lists with the merge strategy: union, keeping order.
MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})


def merge_key(field: str, path: tuple[str, ...]) -> str | None:
    if field == "ports":
        return "containerPort" if any("ontainers" in p for p in path) else "port"
    return MERGE_KEYS.get(field)


def apply_strategic_merge_patch(target: Any, patch: Any, *, path: tuple[str, ...] = ()) -> Any:
    """Strategic merge for built-in kinds, with `$patch`, `$retainKeys`,
    `$deleteFromPrimitiveList/<f>` and `$setElementOrder/<f>` (the order of merged lists).
    """
    if not isinstance(patch, dict):
        raise errors.bad_request("strategic merge patch must be a JSON object")
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_directives({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return None
    if not isinstance(target, dict):
        target = {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            current = target.get(field)
            if isinstance(current, list) and isinstance(value, list):
                target[field] = [item for item in current if item not in value]
            continue
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            merged = apply_strategic_merge_patch(target.get(key), value, path=(*path, key))
            if merged is None:
                target.pop(key, None)
            else:
                target[key] = merged
        elif isinstance(value, list):
            order = patch.get(f"$setElementOrder/{key}")
            target[key] = _merge_list(
                key,
                target.get(key),
                patch=value,
                path=(*path, key),
                order=order if isinstance(order, list) else None,
            )
        else:
            target[key] = value
    if isinstance(retain, list):
        for key in list(target):
            if key not in retain:
                del target[key]
    return target


def _merge_list(
    field: str, current: Any, *, patch: list, path: tuple[str, ...], order: list | None = None
) -> list:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_strip_directives(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if not isinstance(current, list):
        current = []
    if field in MERGED_PRIMITIVE_LISTS:
        result = list(current)
        result.extend(item for item in patch if item not in result)
        return result
    key = merge_key(field, path)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [_strip_directives(i) for i in patch]
    result = [copy.deepcopy(i) for i in current]
    patched: list[Any] = []  # merge-key values the patch names and keeps, in patch order
    for item in patch:
        if key not in item:
            raise errors.bad_request(f"map: {item} does not contain declared merge key: {key}")
        index = next(
            (
                n
                for n, old in enumerate(result)
                if isinstance(old, dict) and old.get(key) == item[key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        patched.append(item[key])
        if index is None:
            result.append(_strip_directives(item))
        else:
            result[index] = apply_strategic_merge_patch(result[index], item, path=path)
    return _normalize_order(result, current, patched=patched, order=order, key=key)


def _normalize_order(
    merged: list, current: list, *, patched: list, order: list | None, key: str
) -> list:
    """The order strategicpatch's normalizeElementOrder gives a merged list: the items the
    patch names (in ``$setElementOrder`` order if given, else patch order) and the server-only
    ones (in server order) merged like two sorted lists, a server-only item going first only
    when both stand in the server's list and it stands earlier. So a new item comes before the
    server-only items: a patch adding gate ``b`` to ``[a]`` yields ``[b, a]``."""

    def merge_value(item: Any) -> Any:
        return item.get(key) if isinstance(item, dict) else None

    server_order = [merge_value(i) for i in current]
    wanted = [merge_value(i) for i in order] if order else patched

    def server_index(item: Any) -> int:
        value = merge_value(item)
        return server_order.index(value) if value in server_order else -1

    named = [i for i in merged if merge_value(i) in patched]
    named.sort(
        key=lambda i: wanted.index(merge_value(i)) if merge_value(i) in wanted else len(wanted)
    )
    server_only = [i for i in merged if merge_value(i) not in patched]
    server_only.sort(key=server_index)
    result: list = []
    left, right = 0, 0
    while left < len(server_only) or right < len(named):
        if right >= len(named):
            result.append(server_only[left])
            left += 1
        elif left >= len(server_only):
            result.append(named[right])
            right += 1
        else:
            li, ri = server_index(server_only[left]), server_index(named[right])
            if li >= 0 and ri >= 0 and li < ri:
                result.append(server_only[left])
                left += 1
            else:
                result.append(named[right])
                right += 1
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not k.startswith("$") and v is not None
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def apply_apply_patch(target: dict, patch: Any) -> dict:
    """Server-side apply without field ownership: a deep merge with the strategic merge keys.

    Fields the applier stopped sending are not removed (no managedFields): a documented deviation.
    """
    if not isinstance(patch, dict):
        raise errors.bad_request("apply patch must be a YAML or JSON object")
    result = apply_strategic_merge_patch(target, patch)
    assert isinstance(result, dict)
    return result
