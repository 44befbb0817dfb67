#!/usr/bin/env bash
# The end-to-end suite on a real cluster: kind in Docker (`make e2e-kind`).
#
# Needs a running Docker engine, kind and kubectl on PATH. Steps:
#   1. create the kind cluster (or reuse it when it already exists);
#   2. build the image queuetree:e2e and load it into the cluster's nodes (never pulled);
#   3. apply the CRDs, wait until they are Established, then apply manifests/overlays/e2e;
#   4. wait for both Deployments to roll out and for the webhook to fill its caBundle;
#   5. run the same e2e suite as on kubesim: pytest e2e --e2e, with KUBECONFIG set to the cluster;
#   6. on failure, collect pod logs, events and `kind export logs` under $ARTIFACTS;
#   7. delete the cluster, unless KEEP_CLUSTER=1 (or the cluster existed before the run).
#
# Settings (environment):
#   KIND_CLUSTER_NAME  cluster name                        (default queuetree-e2e)
#   KIND_NODE_IMAGE    node image, Kubernetes >= 1.30       (default kindest/node:v1.32.2)
#   IMAGE              image built and loaded               (default queuetree:e2e, as the overlay)
#   ARTIFACTS          where logs go on failure             (default $TMPDIR/queuetree-e2e-kind)
#   KEEP_CLUSTER       1 keeps the cluster for debugging    (default 0)
#   E2E_PYTEST         the test command                     (default ".venv/bin/pytest e2e --e2e")
#   E2E_ARGS           extra arguments for pytest           (default none)
#   WAIT_TIMEOUT       seconds for each wait                (default 180)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-queuetree-e2e}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.32.2}
IMAGE=${IMAGE:-queuetree:e2e}
ARTIFACTS=${ARTIFACTS:-${TMPDIR:-/tmp}/queuetree-e2e-kind}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
E2E_PYTEST=${E2E_PYTEST:-.venv/bin/pytest e2e --e2e}
E2E_ARGS=${E2E_ARGS:-}
WAIT_TIMEOUT=${WAIT_TIMEOUT:-180}
NAMESPACE=queuetree-system
OVERLAY=manifests/overlays/e2e

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'e2e-kind: %s\n' "$*" >&2; exit 2; }

for tool in docker kind kubectl; do
    command -v "$tool" >/dev/null || die "$tool is not on PATH (make e2e-kind needs Docker, kind and kubectl)"
done
docker info >/dev/null 2>&1 || die "no running Docker engine (docker info failed)"
[[ $IMAGE == *:* && $IMAGE != *:latest ]] \
    || die "IMAGE=$IMAGE: use an explicit tag other than :latest, or kind nodes try to pull it"

if [[ $E2E_PYTEST == ".venv/bin/pytest e2e --e2e" && ! -x .venv/bin/pytest ]]; then
    make setup
fi

mkdir -p "$ARTIFACTS"
KUBECONFIG_FILE=$(mktemp "${TMPDIR:-/tmp}/queuetree-e2e-kubeconfig.XXXXXX")
export KUBECONFIG=$KUBECONFIG_FILE

created=0
collect_and_clean() {
    local status=$?
    if [[ $status -ne 0 ]]; then
        log "failed (exit $status): collecting logs into $ARTIFACTS"
        kubectl get all,events -n "$NAMESPACE" -o wide >"$ARTIFACTS/objects.txt" 2>&1 || true
        for deployment in queuetree-operator queuetree-webhook; do
            kubectl logs -n "$NAMESPACE" "deployment/$deployment" --all-containers --prefix \
                --tail=-1 >"$ARTIFACTS/$deployment.log" 2>&1 || true
        done
        kind export logs "$ARTIFACTS/kind" --name "$KIND_CLUSTER_NAME" >/dev/null 2>&1 || true
    fi
    if [[ $created -eq 1 && $KEEP_CLUSTER != 1 ]]; then
        log "deleting cluster $KIND_CLUSTER_NAME"
        kind delete cluster --name "$KIND_CLUSTER_NAME" >/dev/null 2>&1 || true
    fi
    rm -f "$KUBECONFIG_FILE"
    exit "$status"
}
trap collect_and_clean EXIT

# Poll until "$@" prints something non-empty, or fail after WAIT_TIMEOUT seconds.
wait_for_output() {
    local what=$1
    shift
    local deadline=$((SECONDS + WAIT_TIMEOUT))
    until [[ -n $("$@" 2>/dev/null || true) ]]; do
        ((SECONDS < deadline)) || die "timed out after ${WAIT_TIMEOUT}s waiting for $what"
        sleep 2
    done
}

# 1. The cluster.
if kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
    log "reusing cluster $KIND_CLUSTER_NAME (it is kept afterwards)"
else
    log "creating cluster $KIND_CLUSTER_NAME ($KIND_NODE_IMAGE)"
    kind create cluster --name "$KIND_CLUSTER_NAME" --image "$KIND_NODE_IMAGE" --wait "${WAIT_TIMEOUT}s"
    created=1
fi
kind get kubeconfig --name "$KIND_CLUSTER_NAME" >"$KUBECONFIG_FILE"

# 2. The image, built here and loaded into every node.
log "building $IMAGE"
docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$KIND_CLUSTER_NAME"

# 3. CRDs first, so the rest (and the suite) never races their registration.
log "installing the CRDs and $OVERLAY"
kubectl apply --server-side -k crds
kubectl wait --for=condition=Established --timeout="${WAIT_TIMEOUT}s" \
    crd/queues.scheduling.volcano.sh crd/podgroups.scheduling.volcano.sh
kubectl apply --server-side -k "$OVERLAY"

# 4. Ready: both Deployments rolled out, and the webhook has published its CA (self-managed
#    certificates), without which every queue request would fail closed.
for deployment in queuetree-webhook queuetree-operator; do
    kubectl rollout status -n "$NAMESPACE" "deployment/$deployment" --timeout="${WAIT_TIMEOUT}s"
done
for config in mutatingwebhookconfiguration/queuetree-mutating-webhook \
    validatingwebhookconfiguration/queuetree-validating-webhook; do
    wait_for_output "the caBundle of $config" \
        kubectl get "$config" -o 'jsonpath={.webhooks[0].clientConfig.caBundle}'
done

# 5. The same suite as on kubesim, against this cluster. QUEUETREE_E2E_EXISTING tells the suite
#    that queuetree already runs here, so it must not start its own kubesim stack.
export QUEUETREE_E2E_EXISTING=1
log "running: $E2E_PYTEST $E2E_ARGS (KUBECONFIG=$KUBECONFIG)"
# shellcheck disable=SC2086 # both are word lists on purpose
$E2E_PYTEST $E2E_ARGS
log "e2e on kind passed"
