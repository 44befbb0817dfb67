"""A real Kubernetes control plane as local processes, for e2e tests and the sandbox.

kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok (fake nodes and pod
lifecycle), built from their Go modules (:mod:`controlplane.building`, ``make controlplane``)
and started on free loopback ports (:mod:`controlplane.cluster`). Like kubesim, it knows
nothing about queuetree.
"""
