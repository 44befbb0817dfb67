"""Kubeconfig files pointing a client at a kubesim server (plain HTTP, bearer token)."""

from __future__ import annotations

import pathlib

import yaml


def write_kubeconfig(
    path: pathlib.Path, *, url: str, token: str = "admin", context: str = "kubesim"
) -> pathlib.Path:
    """A kubeconfig with one cluster, one token user and one current context (namespace default)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": url}}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.replace(path)
    return path
