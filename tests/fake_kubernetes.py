"""pytest plugin: `api`, a small Kubernetes API server made here for the test. It answers the real
paths of ray.io/v1 RayClusters with objects shaped as KubeRay writes them, and the resolver reaches
it through a kubeconfig, as it would reach a real cluster from a laptop."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from job.adapters import kuberay

TOKEN = "fake-sa-token"


def kuberay_raycluster(namespace: str, name: str, status: dict) -> dict:
    """A RayCluster as the API returns it once KubeRay has reconciled it (fields as in
    ray-operator/apis/ray/v1/raycluster_types.go)."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": "6f1c3d2e-7a44-4d0b-9a51-2b7f0c1e9d10",
            "resourceVersion": "48213",
            "generation": 1,
            "creationTimestamp": "2026-11-20T09:12:03Z",
        },
        "spec": {
            "rayVersion": "2.54.0",
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0"},
                "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.54.0"}]}},
            },
            "workerGroupSpecs": [
                {"groupName": "cpu", "replicas": 2, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                 "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.54.0"}]}}}
            ],
        },
        "status": status,
    }


def ready_status(name: str, **overrides) -> dict:
    status = {
        "state": "ready",
        "conditions": [
            {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady", "message": "",
             "lastTransitionTime": "2026-11-20T09:12:41Z", "observedGeneration": 1},
            {"type": "RayClusterProvisioned", "status": "True", "reason": "AllPodRunningAndReadyFirstTime", "message": "",
             "lastTransitionTime": "2026-11-20T09:12:58Z", "observedGeneration": 1},
        ],
        "desiredCPU": "3", "desiredMemory": "6G", "desiredGPU": "0", "desiredTPU": "0",
        "desiredWorkerReplicas": 2, "availableWorkerReplicas": 2, "readyWorkerReplicas": 2,
        "minWorkerReplicas": 0, "maxWorkerReplicas": 4,
        "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379", "metrics": "8080"},
        "head": {"podIP": "10.244.0.17", "podName": f"{name}-head-x7k2p", "serviceIP": "10.96.143.20",
                 "serviceName": f"{name}-head-svc"},
        "lastUpdateTime": "2026-11-20T09:13:00Z",
        "stateTransitionTimes": {"ready": "2026-11-20T09:12:58Z"},
        "observedGeneration": 1,
    }
    status.update(overrides)
    return status


class FakeKubernetesAPI(ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.objects: dict[tuple[str, str], dict] = {}
        self.forbidden_namespaces: set[str] = set()
        self.requests: list[tuple[str, str | None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def put(self, namespace: str, name: str, status: dict) -> None:
        self.objects[(namespace, name)] = kuberay_raycluster(namespace, name, status)


class _Handler(BaseHTTPRequestHandler):
    server: FakeKubernetesAPI

    def do_GET(self):
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        # The scheme is case-insensitive: the in-cluster loader sends "bearer".
        credentials = token if scheme.lower() == "bearer" else None
        self.server.requests.append((self.path.split("?")[0], credentials))
        parts = self.path.split("?")[0].strip("/").split("/")
        if credentials != TOKEN:
            return self._status(401, "Unauthorized", "Unauthorized")
        if len(parts) != 7 or parts[:3] != ["apis", "ray.io", "v1"] or parts[3] != "namespaces" or parts[5] != "rayclusters":
            return self._status(404, "NotFound", "the server could not find the requested resource")
        namespace, name = parts[4], parts[6]
        if namespace in self.server.forbidden_namespaces:
            return self._status(403, "Forbidden",
                                f'rayclusters.ray.io "{name}" is forbidden: '
                                'User "system:serviceaccount:ray-scheduler:job-scheduler" '
                                f'cannot get resource "rayclusters" in API group "ray.io" in the namespace "{namespace}"')
        obj = self.server.objects.get((namespace, name))
        if obj is None:
            return self._status(404, "NotFound", f'rayclusters.ray.io "{name}" not found', name=name)
        self._send(200, obj)

    def _status(self, code: int, reason: str, message: str, name: str | None = None):
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason,
                "code": code}
        if name:
            body["details"] = {"name": name, "group": "ray.io", "kind": "rayclusters"}
        self._send(code, body)

    def _send(self, code: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def api(tmp_path, monkeypatch):
    server = FakeKubernetesAPI()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {server.url}
users:
- name: scheduler
  user:
    token: {TOKEN}
contexts:
- name: fake
  context:
    cluster: fake
    user: scheduler
    namespace: ray-scheduler
current-context: fake
"""
    )
    # Not in a pod here, whatever the machine says: the kubeconfig must be the one used.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    kuberay._custom_objects_api.cache_clear()
    yield server
    kuberay._custom_objects_api.cache_clear()
    server.shutdown()
    server.server_close()
