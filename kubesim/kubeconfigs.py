"""Kubeconfig files pointing a client at a kubesim server (HTTP or HTTPS, bearer token)."""

from __future__ import annotations

import pathlib

import yaml


def write_kubeconfig(
    path: pathlib.Path,
    *,
    url: str,
    token: str = "admin",
    context: str = "kubesim",
    ca_bundle: str | None = None,
) -> pathlib.Path:
    """A kubeconfig with one cluster, one token user and one current context (namespace default).

    ``ca_bundle`` (base64 of PEM, ``KubeSim.ca_bundle``) is the CA of an HTTPS server. kubectl
    sends a bearer token only over HTTPS: over plain HTTP every kubectl call is anonymous, which
    kubesim treats as the administrator.
    """
    cluster: dict[str, str] = {"server": url}
    if ca_bundle is not None:
        cluster["certificate-authority-data"] = ca_bundle
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
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
