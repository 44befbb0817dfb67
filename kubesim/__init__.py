"""kubesim: a Kubernetes API server emulator for end-to-end tests and the local sandbox.

It knows nothing about queuetree (an import-linter contract says so). Modules:

- `server`: the aiohttp front (routing, discovery, OpenAPI, faults, audit) and `KubeSim`, which
  runs it in a thread of its own; `__main__`: `python -m kubesim`; `harness`: the pytest fixture
  and `running()`; `kubeconfigs`: kubeconfig files.
- `apiserver`: kube-apiserver's request semantics over `store` (objects, resourceVersions, watch
  event logs) and `registry` (built-in and CRD resources).
- `patching`, `selectors`, `tables`, `fields`, `protobuf`: patches, selectors, Tables for
  kubectl, known fields of built-in kinds, kubectl's protobuf bodies; `errors`: Status bodies.
- `pods` and `crds`: the strategies of pods (gates, defaults, immutability) and of CRDs (schema
  pruning and validation).
- `admission`, `certs`, `simulation`: admission webhooks, test certificates, and the simulated
  scheduler and kubelet.

See README.md in this directory for usage and every deliberate deviation from kube-apiserver.
"""
