"""A stand-in for the Ray dashboard of every RayCluster, so a RayJob can finish on kwok.

KubeRay decides that a RayJob is done by asking the Ray dashboard of its cluster
(``GET http://<head service>.<namespace>.svc.<domain>:8265/api/jobs/<job id>``) and waiting
for its submitter Job to finish. kwok's pods run no process: nothing serves that address,
and no local process can even resolve it, so a RayJob stays Running for ever. As kwok plays
the kubelet, this server plays the dashboard: KubeRay's dashboard client uses Go's default
transport, which honours ``HTTP_PROXY``, so the harness starts KubeRay with ``HTTP_PROXY``
pointing here (``NO_PROXY`` keeps the API server direct) and every dashboard request comes
here, whatever the cluster. It answers that every job has ``SUCCEEDED`` (and accepts
submissions, stops and deletions): the Ray side of the job is simulated, the Kubernetes side
(the cluster's pods, the submitter Job, KubeRay's own states) is real.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.parse
from typing import Any

JOBS = "/api/jobs/"


class _Handler(http.server.BaseHTTPRequestHandler):
    def _answer(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _path(self) -> str:
        # A proxied request names the whole URL; a direct one, the path.
        return urllib.parse.urlsplit(self.path).path

    def do_GET(self) -> None:
        path = self._path()
        if path.startswith(JOBS) and path != JOBS and not path.endswith("/logs"):
            self._answer(_job(path[len(JOBS) :].strip("/")))
        elif path.endswith("/logs"):
            self._answer({"logs": ""})
        elif path == JOBS:
            self._answer([])
        else:
            self._answer({})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        job = str(request.get("submission_id") or "job") if isinstance(request, dict) else "job"
        self._answer({"job_id": job, "submission_id": job, "stopped": True})

    def do_DELETE(self) -> None:
        self._answer({"deleted": True})

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _job(job: str) -> dict[str, Any]:
    now = int(time.time() * 1000)
    return {
        "job_id": job,
        "submission_id": job,
        "status": "SUCCEEDED",
        "entrypoint": "",
        "message": "simulated by the harness's Ray dashboard (controlplane/raydashboard.py)",
        "start_time": now - 1000,
        "end_time": now,
    }


class Dashboard:
    """The server, on a free loopback port, in a daemon thread."""

    def __init__(self) -> None:
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="ray dashboard", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def proxy_env(self) -> dict[str, str]:
        """The environment that sends a Go program's plain-HTTP requests here, and its API
        server requests (loopback) straight on."""
        return {
            "HTTP_PROXY": self.url,
            "http_proxy": self.url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
