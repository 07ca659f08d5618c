"""RayCluster discovery against a small Kubernetes API server made here (tests/fake_kubernetes.py,
the `api` fixture), reached through a kubeconfig as a real cluster would be from a laptop."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from fake_kubernetes import TOKEN, FakeKubernetesAPI, ready_status

from job.adapters import kuberay
from job.core.errors import BadInput, ClusterNotReady


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
                                   "availableWorkerReplicas": 1, "desiredWorkerReplicas": 1,
                                   "lastUpdateTime": "2026-11-20T09:13:00Z"})
    assert kuberay.resolve_dashboard_url("raycluster://team-a/gpu-pool") == "http://gpu-pool-head-svc.team-a.svc.cluster.local:8265"


def test_missing_raycluster_is_not_ready_with_its_name(api):
    with pytest.raises(ClusterNotReady, match=r"^raycluster ml/absent not found$"):
        kuberay.resolve_dashboard_url("raycluster://ml/absent")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param({}, "state=unset", id="just-created-no-status"),
        pytest.param(ready_status("c", state="", conditions=[
            {"type": "HeadPodReady", "status": "False", "reason": "HeadPodNotFound", "message": "",
             "lastTransitionTime": "2026-11-20T09:12:03Z"},
            {"type": "RayClusterProvisioned", "status": "False", "reason": "RayClusterPodsProvisioning", "message": "",
             "lastTransitionTime": "2026-11-20T09:12:03Z"},
        ]), "state=unset, HeadPodReady=False (HeadPodNotFound)", id="head-pod-pending"),
        pytest.param(ready_status("c", conditions=[
            {"type": "HeadPodReady", "status": "False", "reason": "HeadPodNotReady",
             "message": "containers with unready status: [ray-head]", "lastTransitionTime": "2026-11-20T10:02:11Z"},
            {"type": "RayClusterProvisioned", "status": "True", "reason": "AllPodRunningAndReadyFirstTime", "message": "",
             "lastTransitionTime": "2026-11-20T09:12:58Z"},
        ]), "state=ready, HeadPodReady=False (HeadPodNotReady: containers with unready status: [ray-head])",
        id="head-restarting-after-ready"),
        pytest.param({"state": "failed", "reason": "RayClusterPodsProvisioning failed"},
                     "state=failed (RayClusterPodsProvisioning failed)", id="old-kuberay-failed"),
        pytest.param(ready_status("c", state="suspended", conditions=[
            {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady", "message": "",
             "lastTransitionTime": "2026-11-20T09:12:41Z"},
            {"type": "RayClusterSuspending", "status": "True", "reason": "RayClusterSuspending", "message": "",
             "lastTransitionTime": "2026-11-20T11:00:00Z"},
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
    with pytest.raises(ClusterNotReady, match=r"status\.endpoints\.dashboard is 'dashboard', not a port number"):
        kuberay.resolve_dashboard_url("raycluster://ml/c")


def test_forbidden_namespace_names_the_missing_permission(api):
    api.forbidden_namespaces.add("other-team")
    with pytest.raises(ClusterNotReady,
                       match=r"raycluster other-team/c: .*403.*needs get on rayclusters.ray.io in namespace other-team"):
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
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert, key_file = directory / "ca.crt", directory / "tls.key"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
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
    with pytest.raises(ClusterNotReady,
                       match=r"raycluster ml/c: the Kubernetes API refused the credentials \(401 Unauthorized\)"):
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
    code = (f"import sys, job.adapters.kuberay as r; assert r.resolve_dashboard_url({address!r}) == {address!r};"
            " print('kubernetes' in sys.modules)")
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
