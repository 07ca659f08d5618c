"""RayCluster discovery against a small Kubernetes API server made here: it answers the real
paths of ray.io/v1 RayClusters with objects shaped as KubeRay writes them, and the resolver
reaches it through a kubeconfig, as it would reach a real cluster from a laptop."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from job.adapters import kuberay
from job.core.errors import BadInput, ClusterNotReady

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
        "head": {"podIP": "10.244.0.17", "podName": f"{name}-head-x7k2p", "serviceIP": "10.96.143.20", "serviceName": f"{name}-head-svc"},
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
            return self._status(403, "Forbidden", f'rayclusters.ray.io "{name}" is forbidden: User "system:serviceaccount:ray-scheduler:job-scheduler" '
                                f'cannot get resource "rayclusters" in API group "ray.io" in the namespace "{namespace}"')
        obj = self.server.objects.get((namespace, name))
        if obj is None:
            return self._status(404, "NotFound", f'rayclusters.ray.io "{name}" not found', name=name)
        self._send(200, obj)

    def _status(self, code: int, reason: str, message: str, name: str | None = None):
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}
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


def test_ready_raycluster_resolves_to_its_head_service_dashboard(api):
    api.put("ml", "shared", ready_status("shared"))
    assert kuberay.resolve_dashboard_url("raycluster://ml/shared") == "http://shared-head-svc.ml.svc.cluster.local:8265"
    assert api.requests == [("/apis/ray.io/v1/namespaces/ml/rayclusters/shared", TOKEN)]


def test_service_name_and_dashboard_port_come_from_the_status(api):
    status = ready_status("shared")
    status["head"]["serviceName"] = "shared-dash"
    status["endpoints"]["dashboard"] = "18265"
    api.put("ml", "shared", status)
    assert kuberay.resolve_dashboard_url("raycluster://ml/shared") == "http://shared-dash.ml.svc.cluster.local:18265"


def test_older_kuberay_status_falls_back_to_name_head_svc_and_8265(api):
    # KubeRay before 1.2: no conditions, head without serviceName, and here no endpoints yet.
    api.put("team-a", "gpu-pool", {"state": "ready", "head": {"podIP": "10.244.1.9", "serviceIP": "10.96.7.1"},
                                   "availableWorkerReplicas": 1, "desiredWorkerReplicas": 1, "lastUpdateTime": "2026-11-20T09:13:00Z"})
    assert kuberay.resolve_dashboard_url("raycluster://team-a/gpu-pool") == "http://gpu-pool-head-svc.team-a.svc.cluster.local:8265"


def test_missing_raycluster_is_not_ready_with_its_name(api):
    with pytest.raises(ClusterNotReady, match=r"^raycluster ml/absent not found$"):
        kuberay.resolve_dashboard_url("raycluster://ml/absent")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param({}, "state=unset", id="just-created-no-status"),
        pytest.param(ready_status("c", state="", conditions=[
            {"type": "HeadPodReady", "status": "False", "reason": "HeadPodNotFound", "message": "", "lastTransitionTime": "2026-11-20T09:12:03Z"},
            {"type": "RayClusterProvisioned", "status": "False", "reason": "RayClusterPodsProvisioning", "message": "", "lastTransitionTime": "2026-11-20T09:12:03Z"},
        ]), "state=unset, HeadPodReady=False (HeadPodNotFound)", id="head-pod-pending"),
        pytest.param(ready_status("c", conditions=[
            {"type": "HeadPodReady", "status": "False", "reason": "HeadPodNotReady", "message": "containers with unready status: [ray-head]", "lastTransitionTime": "2026-11-20T10:02:11Z"},
            {"type": "RayClusterProvisioned", "status": "True", "reason": "AllPodRunningAndReadyFirstTime", "message": "", "lastTransitionTime": "2026-11-20T09:12:58Z"},
        ]), "state=ready, HeadPodReady=False (HeadPodNotReady: containers with unready status: [ray-head])", id="head-restarting-after-ready"),
        pytest.param({"state": "failed", "reason": "RayClusterPodsProvisioning failed"}, "state=failed (RayClusterPodsProvisioning failed)", id="old-kuberay-failed"),
        pytest.param(ready_status("c", state="suspended", conditions=[
            {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady", "message": "", "lastTransitionTime": "2026-11-20T09:12:41Z"},
            {"type": "RayClusterSuspending", "status": "True", "reason": "RayClusterSuspending", "message": "", "lastTransitionTime": "2026-11-20T11:00:00Z"},
        ]), "state=suspended, HeadPodReady=True, RayClusterSuspending=True", id="suspending"),
    ],
)
def test_not_ready_raycluster_says_what_kuberay_reports(api, status, reason):
    api.put("ml", "c", status)
    with pytest.raises(ClusterNotReady) as caught:
        kuberay.resolve_dashboard_url("raycluster://ml/c")
    assert str(caught.value) == f"raycluster ml/c is not ready: {reason}"


def test_a_dashboard_endpoint_that_is_not_a_port_is_refused(api):
    status = ready_status("c")
    status["endpoints"]["dashboard"] = "dashboard"  # a named targetPort, as KubeRay copies it
    api.put("ml", "c", status)
    with pytest.raises(ClusterNotReady, match="status.endpoints.dashboard is 'dashboard', not a port number"):
        kuberay.resolve_dashboard_url("raycluster://ml/c")


def test_forbidden_namespace_names_the_missing_permission(api):
    api.forbidden_namespaces.add("other-team")
    with pytest.raises(ClusterNotReady, match=r"raycluster other-team/c: .*403.*needs get on rayclusters.ray.io in namespace other-team"):
        kuberay.resolve_dashboard_url("raycluster://other-team/c")


def test_one_missing_cluster_does_not_spoil_the_next(api):
    api.put("ml", "good", ready_status("good"))
    with pytest.raises(ClusterNotReady):
        kuberay.resolve_dashboard_url("raycluster://ml/gone")
    assert kuberay.resolve_dashboard_url("raycluster://ml/good") == "http://good-head-svc.ml.svc.cluster.local:8265"


def test_configuration_is_loaded_once_per_process(api, tmp_path, monkeypatch):
    api.put("ml", "c", ready_status("c"))
    kuberay.resolve_dashboard_url("raycluster://ml/c")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    # Still the first configuration, and the RayCluster is read again (its status can change).
    api.put("ml", "c", ready_status("c", head={"serviceName": "moved-svc"}))
    assert kuberay.resolve_dashboard_url("raycluster://ml/c") == "http://moved-svc.ml.svc.cluster.local:8265"
    assert len(api.requests) == 2


def _self_signed_certificate(directory) -> tuple[str, str]:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert, key_file = directory / "ca.crt", directory / "tls.key"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return str(cert), str(key_file)


def test_in_a_pod_the_service_account_wins_over_a_kubeconfig(api, tmp_path, monkeypatch):
    """In a pod: the API server from KUBERNETES_SERVICE_HOST/PORT over TLS, with the mounted
    token and CA, even where a kubeconfig exists (here the `api` fixture's, which must go unused)."""
    import ssl

    from kubernetes.config import incluster_config

    in_cluster = FakeKubernetesAPI()
    cert, key = _self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    in_cluster.socket = context.wrap_socket(in_cluster.socket, server_side=True)
    threading.Thread(target=in_cluster.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        (tmp_path / "token").write_text(TOKEN)
        monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
        monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", cert)
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(in_cluster.server_address[1]))
        in_cluster.put("ml", "c", ready_status("c"))
        assert kuberay.resolve_dashboard_url("raycluster://ml/c") == "http://c-head-svc.ml.svc.cluster.local:8265"
        assert in_cluster.requests == [("/apis/ray.io/v1/namespaces/ml/rayclusters/c", TOKEN)]
        assert api.requests == []
    finally:
        in_cluster.shutdown()
        in_cluster.server_close()


def test_no_configuration_is_not_ready_and_not_remembered(api, tmp_path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(ClusterNotReady, match=r"no Kubernetes configuration \(in cluster: .*; kubeconfig .*absent: "):
        kuberay.resolve_dashboard_url("raycluster://ml/c")
    api.put("ml", "c", ready_status("c"))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert kuberay.resolve_dashboard_url("raycluster://ml/c").startswith("http://c-head-svc.ml.")


def test_refused_credentials_are_named(api, tmp_path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig.read_text().replace(TOKEN, "expired-token"))
    with pytest.raises(ClusterNotReady, match=r"raycluster ml/c: the Kubernetes API refused the credentials \(401 Unauthorized\)"):
        kuberay.resolve_dashboard_url("raycluster://ml/c")


def test_unreachable_api_server_is_not_ready(api):
    api.put("ml", "c", ready_status("c"))
    url = api.url
    api.shutdown()
    api.server_close()
    with pytest.raises(ClusterNotReady, match=f"raycluster ml/c: cannot reach the Kubernetes API at {url}"):
        kuberay.resolve_dashboard_url("raycluster://ml/c")


@pytest.mark.parametrize("address", ["http://head:8265", "https://ray.example.org"])
def test_http_addresses_pass_through_without_kubernetes(address):
    code = f"import sys, job.adapters.kuberay as r; assert r.resolve_dashboard_url({address!r}) == {address!r}; print('kubernetes' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_cli_does_not_import_kubernetes():
    code = "import sys, job.cli; job.cli.build_parser(); print('kubernetes' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


@pytest.mark.parametrize(
    "address",
    ["raycluster://ml", "raycluster://ml/", "raycluster:///c", "raycluster://ML/c", "raycluster://ml/c/extra",
     "raycluster://ml/c d", "ray://head:10001", "head:8265", ""],
)
def test_malformed_addresses_are_bad_input(address):
    with pytest.raises(BadInput, match="raycluster://NAMESPACE/NAME"):
        kuberay.resolve_dashboard_url(address)
