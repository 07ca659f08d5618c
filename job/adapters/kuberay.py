"""`raycluster://NAMESPACE/NAME`: a resource group's Ray cluster named as a KubeRay RayCluster,
resolved to its head service's dashboard URL from the RayCluster's status.

The kubernetes package is imported on the first such address only: commands that never meet one
(`python -m job jobs`) do not pay for it. Its configuration (in-cluster, else kubeconfig) is
loaded once per process; the RayCluster itself is read on every call, since its head service can
move or stop being ready between ticks.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

from job import log
from job.core.errors import BadInput, ClusterNotReady

DEFAULT_DASHBOARD_PORT = 8265
# (connect, read) seconds: a hung API server must not eat the loop's few seconds per tick.
_API_TIMEOUT = (3, 10)
_ADDRESS = re.compile(r"raycluster://(?P<namespace>[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)/(?P<name>[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?)")


def resolve_dashboard_url(address: str) -> str:
    """The Ray dashboard URL of a group's `ray_address`: http(s) addresses as they are, RayClusters
    through the Kubernetes API. Raises ClusterNotReady when the RayCluster cannot be used now."""
    if address.startswith(("http://", "https://")):
        return address
    namespace, name = parse_address(address)
    cluster = f"raycluster {namespace}/{name}"
    status = _read_raycluster(namespace, name, cluster).get("status") or {}
    not_ready = _not_ready_reason(status)
    if not_ready:
        raise ClusterNotReady(f"{cluster} is not ready: {not_ready}")
    service = (status.get("head") or {}).get("serviceName") or f"{name}-head-svc"
    url = f"http://{service}.{namespace}.svc.cluster.local:{_dashboard_port(status, cluster)}"
    log.debug("raycluster_resolved", cluster=f"{namespace}/{name}", url=url)
    return url


def parse_address(address: str) -> tuple[str, str]:
    match = _ADDRESS.fullmatch(address)
    if not match:
        raise BadInput(
            f"{address!r} is not a Ray address: use http://host:port (the dashboard) or raycluster://NAMESPACE/NAME "
            "(Kubernetes names: lower-case letters, digits and '-')"
        )
    return match["namespace"], match["name"]


def _not_ready_reason(status: dict[str, Any]) -> str | None:
    """None when the head can take job submissions, else what KubeRay says about it.

    HeadPodReady follows the head pod both ways, so it decides when KubeRay writes it (1.2 and
    later); `state` is all older operators write, and newer ones keep it at "ready" after the head
    restarts, so it is only the fallback. RayClusterProvisioned is not used: it never turns back.
    A suspending cluster is about to lose its pods, so it is not ready either.
    """
    state = status.get("state") or "unset"
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    suspending = [kind for kind in ("RayClusterSuspending", "RayClusterSuspended") if conditions.get(kind, {}).get("status") == "True"]
    head = conditions.get("HeadPodReady")
    if head is not None:
        ready = head.get("status") == "True"
        detail = f"state={state}, HeadPodReady={head.get('status')}"
        if not ready and (head.get("reason") or head.get("message")):
            detail += f" ({': '.join(part for part in (head.get('reason'), head.get('message')) if part)})"
    else:
        ready = state == "ready"
        detail = f"state={state}" + (f" ({status['reason']})" if status.get("reason") else "")
    if suspending:
        return f"{detail}, {'/'.join(suspending)}=True"
    return None if ready else detail


def _dashboard_port(status: dict[str, Any], cluster: str) -> int:
    port = (status.get("endpoints") or {}).get("dashboard")
    if port is None:
        return DEFAULT_DASHBOARD_PORT
    if not str(port).isdigit() or not 0 < int(port) < 65536:
        raise ClusterNotReady(f"{cluster}: status.endpoints.dashboard is {port!r}, not a port number")
    return int(port)


def _read_raycluster(namespace: str, name: str, cluster: str) -> dict[str, Any]:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    api = _custom_objects_api()
    try:
        return api.get_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", name, _request_timeout=_API_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            raise ClusterNotReady(f"{cluster} not found") from None
        if exc.status == 401:
            raise ClusterNotReady(
                f"{cluster}: the Kubernetes API refused the credentials (401 {exc.reason}): "
                "check the kubeconfig's user, or the pod's ServiceAccount token"
            ) from None
        if exc.status == 403:
            raise ClusterNotReady(
                f"{cluster}: the Kubernetes API refused to read it ({exc.status} {exc.reason}): "
                f"the scheduler's ServiceAccount needs get on rayclusters.ray.io in namespace {namespace}"
            ) from None
        raise ClusterNotReady(f"{cluster}: the Kubernetes API answered {exc.status} {exc.reason}") from None
    except HTTPError as exc:
        raise ClusterNotReady(f"{cluster}: cannot reach the Kubernetes API at {api.api_client.configuration.host}: {exc}") from None


@lru_cache(maxsize=1)
def _custom_objects_api():
    """In a pod, its ServiceAccount; elsewhere the kubeconfig (KUBECONFIG, else ~/.kube/config).
    A failure is not cached: the next address tries again."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException as in_cluster:
        # KUBECONFIG is read now, not when kubernetes was imported, and may list several files.
        kubeconfig = os.environ.get("KUBECONFIG") or "~/.kube/config"
        try:
            config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        except (config.ConfigException, OSError) as exc:
            raise ClusterNotReady(
                f"cannot resolve raycluster:// addresses: no Kubernetes configuration (in cluster: {in_cluster}; kubeconfig {kubeconfig}: {exc})"
            ) from None
    # One quick retry covers a pooled connection the API server closed while idle.
    configuration.retries = 1
    return client.CustomObjectsApi(client.ApiClient(configuration))
