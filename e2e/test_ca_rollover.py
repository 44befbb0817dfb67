"""A rollover of the webhook's own CA while pods are created: no creation fails.

The suite's webhook manages its certificates (``--cert-mode=self-managed``, a check every 2 s,
so each step of a rollover lasts 12 s: ``certificates.CA_OVERLAP_CHECKS`` checks). The test
starts a second replica on the same Secret (the API server calls only the first, registered
by URL; the second is probed directly), creates an opted-in pod every quarter second (every
pod webhook is ``failurePolicy: Fail``), and deletes the Secret with kubectl, which is how an
administrator rotates the CA. Throughout, the certificate each replica serves must be signed
by a CA of every caBundle of the two webhook configurations; the caBundles must go from the
old CA, to the new CA beside the old, to the new CA alone.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from e2e import support
from queuetree.sandbox import kubectl, stack
from queuetree.webhooks import certificates

SECRET = ("secret", stack.SECRET, "-n", stack.NAMESPACE)
ROLLOVER_DEADLINE = 180.0
"""Seconds for the whole rollover: two steps of 12 s, with room for a loaded machine."""


def ca_bundles(client: kubectl.Kubectl) -> list[tuple[bytes, ...]]:
    """The CAs of every webhook's caBundle in both configurations (kube-apiserver may call with
    any of them), one tuple per webhook."""
    found = []
    for configuration in stack.WEBHOOK_CONFIGURATIONS:
        document = client.get_json(configuration)
        for webhook in document.get("webhooks") or []:
            bundle = (webhook.get("clientConfig") or {}).get("caBundle") or ""
            found.append(certificates.split_pem(base64.b64decode(bundle)))
    return found


def signed_by_one_of(serving_pem: bytes, cas: Sequence[bytes]) -> bool:
    serving = x509.load_pem_x509_certificate(serving_pem)
    for ca in cas:
        try:
            serving.verify_directly_issued_by(x509.load_pem_x509_certificate(ca))
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def served(port: int) -> bytes:
    """The certificate a replica serves to a new connection (not verified here)."""
    return ssl.get_server_certificate(("127.0.0.1", port), timeout=10).encode()


class PodProber(threading.Thread):
    """Creates an opted-in pod every quarter second until stopped; keeps every failure."""

    def __init__(self, kube: support.Kube, queue: str) -> None:
        super().__init__(name="rollover pod prober", daemon=True)
        self.kube, self.queue = kube, queue
        self.stopped = threading.Event()
        self.created = 0
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stopped.is_set():
            name = f"rollover-{self.created + len(self.failures)}"
            manifest = support.pod(name, namespace=self.kube.namespace, queue=self.queue)
            done = self.kube.kubectl("create", "-f", "-", input=json.dumps(manifest))
            if done.ok:
                self.created += 1
            else:
                self.failures.append(f"{name}: {done.stderr.strip()}")
            self.stopped.wait(0.25)


class TrustProber(threading.Thread):
    """Reads the caBundles, then the certificate each replica serves, until stopped; keeps
    every moment a replica served a certificate some caBundle does not verify, and the
    sequence of distinct caBundles seen."""

    def __init__(self, client: kubectl.Kubectl, ports: dict[str, int]) -> None:
        super().__init__(name="rollover trust prober", daemon=True)
        self.client, self.ports = client, ports
        self.stopped = threading.Event()
        self.samples = 0
        self.failures: list[str] = []
        self.bundles: list[tuple[bytes, ...]] = []
        """Every distinct caBundle, in the order first seen."""

    def run(self) -> None:
        while not self.stopped.is_set():
            bundles = ca_bundles(self.client)
            self.bundles += [b for b in dict.fromkeys(bundles) if b not in self.bundles]
            for name, port in self.ports.items():
                try:
                    certificate = served(port)
                except OSError as exc:
                    self.failures.append(f"sample {self.samples}: {name}: {exc}")
                    continue
                for index, bundle in enumerate(bundles):
                    if not signed_by_one_of(certificate, bundle):
                        self.failures.append(
                            f"sample {self.samples}: {name} serves a certificate that the "
                            f"caBundle of webhook {index} ({len(bundle)} CAs) does not verify"
                        )
            self.samples += 1
            self.stopped.wait(0.2)


def test_a_ca_rollover_fails_no_pod_creation(cluster: support.Cluster, kube: support.Kube) -> None:
    sandbox = support.sandbox(cluster)

    def steady() -> tuple[bytes, ...] | None:
        bundles = set(ca_bundles(kube.client))
        only = next(iter(bundles)) if len(bundles) == 1 else ()
        return only if len(only) == 1 else None

    old = support.eventually(steady, what="one CA in every caBundle before the rollover")
    queue = support.unique("rollover")
    # Room for no pod: the pods stay gated, the creates are what the test is about.
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "5m"})))
    second = sandbox.start_webhook(support.unique("webhook-replica"))
    pods = PodProber(kube, queue)
    trust = TrustProber(kube.client, {"webhook": sandbox.webhook_port, "second": second.port})
    try:
        trust.start()
        pods.start()
        support.eventually(lambda: pods.created >= 2, what="pods created before the rollover")
        kube.must(kube.kubectl("delete", *SECRET))
        new = support.eventually(
            lambda: next(
                (b[0] for b in ca_bundles(kube.client) if len(b) == 2 and old[0] in b), None
            ),
            what="the new CA beside the old one in a caBundle",
            deadline=ROLLOVER_DEADLINE,
        )

        def finished() -> bool:
            bundles = set(ca_bundles(kube.client))
            return bundles == {(new,)} and all(
                signed_by_one_of(served(port), (new,))
                for port in (sandbox.webhook_port, second.port)
            )

        support.eventually(
            finished,
            what="the new CA alone in every caBundle, and both replicas serving its certificate",
            deadline=ROLLOVER_DEADLINE,
        )
        created_before_end = pods.created
        support.eventually(
            lambda: pods.created >= created_before_end + 2, what="pods created after it"
        )
    finally:
        pods.stopped.set()
        trust.stopped.set()
        pods.join()
        trust.join()
        second.process.stop()
        sandbox.processes.remove(second.process)
    assert (pods.failures, trust.failures, trust.bundles) == ([], [], [old, (new, *old), (new,)])
    assert (pods.created > 0, trust.samples > 0) == (True, True)
