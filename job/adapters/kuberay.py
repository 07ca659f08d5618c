"""`raycluster://NAMESPACE/NAME`: a resource group's Ray cluster named as a KubeRay RayCluster,
resolved to its head service's dashboard URL from the RayCluster's status.

The kubernetes package is imported on the first such address only: commands that never meet one
(`python -m job jobs`) do not pay for it. Its configuration (in-cluster, else kubeconfig) is
loaded once per process; the RayCluster itself is read on every call, since its head service can
move or stop being ready between ticks.
"""

from __future__ import annotations

import json
import os
import re
from decimal import ROUND_UP, Decimal
from functools import lru_cache
from typing import Any

from job import log
from job.core.errors import BadInput, ClusterNotReady
from job.core.specs import NodeType

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


def node_types(address: str) -> list[NodeType]:
    """The kinds of worker node a RayCluster can add, from its `spec.workerGroupSpecs`, read as
    Ray's own KubeRay autoscaler reads them (ray/autoscaler/_private/kuberay/autoscaling_config.py):
    resources from the group's `resources`, else its rayStartParams, else the Ray container's
    limits (then requests); at most maxReplicas times numOfHosts nodes. Labels: the group's
    `labels` (KubeRay 1.5), those of its rayStartParams, and `ray.io/node-group`, which Ray sets
    from the pod's group name. A cluster without in-tree autoscaling cannot grow: no node types.
    A group that cannot be read is left out, with a warning naming what is wrong."""
    namespace, name = parse_address(address)
    cluster = f"raycluster {namespace}/{name}"
    spec = _read_raycluster(namespace, name, cluster).get("spec") or {}
    if not spec.get("enableInTreeAutoscaling"):
        log.warning("raycluster_not_autoscaling", cluster=f"{namespace}/{name}",
                    message="spec.enableInTreeAutoscaling is not true: the cluster cannot grow, no node types")
        return []
    types = []
    for group in spec.get("workerGroupSpecs") or []:
        if group.get("suspend"):
            continue
        try:
            hosts = int(group.get("numOfHosts", 1))
            types.append(NodeType.model_validate({
                "name": group["groupName"], "resources": _group_resources(group), "labels": _group_labels(group),
                "min": int(group.get("minReplicas", 0)) * hosts, "max": int(group["maxReplicas"]) * hosts}))
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
            log.warning("raycluster_node_type_skipped", cluster=f"{namespace}/{name}", node_type=group.get("groupName"),
                        message=f"{type(exc).__name__}: {exc}")
    return types


def _group_resources(group: dict[str, Any]) -> dict[str, float]:
    params = group.get("rayStartParams") or {}
    explicit = group.get("resources") or {}
    container = ((group.get("template") or {}).get("spec") or {}).get("containers", [{}])[0].get("resources") or {}
    limits, requests = container.get("limits") or {}, container.get("requests") or {}
    resources: dict[str, float] = {}
    if explicit:
        # KubeRay 1.5's `resources` is the whole list when given: rayStartParams are then ignored.
        return {key: float(_rounded_up(value)) for key, value in explicit.items()}
    if "num-cpus" in params:
        resources["CPU"] = float(params["num-cpus"])
    elif "cpu" in limits or "cpu" in requests:
        resources["CPU"] = float(_rounded_up(limits.get("cpu", requests.get("cpu"))))
    if "num-gpus" in params:
        resources["GPU"] = float(params["num-gpus"])
    else:
        gpus = next((value for key, value in (*limits.items(), *requests.items()) if key.endswith("gpu")
                     and _rounded_up(value) > 0), None)
        if gpus is not None:
            resources["GPU"] = float(_rounded_up(gpus))
    if "memory" in params:
        resources["memory"] = float(params["memory"])
    elif "memory" in limits or "memory" in requests:
        resources["memory"] = float(_rounded_up(limits.get("memory", requests.get("memory"))))
    if "resources" in params:
        # Written as KubeRay's docs show it: '"{\"Custom1\": 1}"', quoted and escaped.
        text = str(params["resources"]).strip()
        if text[:1] == text[-1:] and text[:1] in "\"'":
            text = text[1:-1]
        resources.update(json.loads(text.replace("\\", "")))
    return resources


def _group_labels(group: dict[str, Any]) -> dict[str, str]:
    labels = {"ray.io/node-group": group["groupName"]}
    for pair in filter(None, str((group.get("rayStartParams") or {}).get("labels", "")).split(",")):
        key, _, value = pair.partition("=")
        labels[key.strip()] = value.strip()
    labels.update(group.get("labels") or {})
    return labels


# Kubernetes quantity suffixes (k8s.io/apimachinery resource.Quantity).
_SUFFIXES: dict[str, int | Decimal] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)([A-Za-z]{0,2})")


def _rounded_up(quantity: Any) -> int:
    """A Kubernetes quantity ('500m', '4Gi', '2') rounded up to a whole number, as Ray does."""
    match = _QUANTITY.fullmatch(str(quantity).strip())
    if not match or match[2] not in _SUFFIXES:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity")
    return int((Decimal(match[1]) * _SUFFIXES[match[2]]).to_integral_value(rounding=ROUND_UP))


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
    suspending = [kind for kind in ("RayClusterSuspending", "RayClusterSuspended")
                  if conditions.get(kind, {}).get("status") == "True"]
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
        host = api.api_client.configuration.host
        raise ClusterNotReady(f"{cluster}: cannot reach the Kubernetes API at {host}: {exc}") from None


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
                "cannot resolve raycluster:// addresses: no Kubernetes configuration "
                f"(in cluster: {in_cluster}; kubeconfig {kubeconfig}: {exc})"
            ) from None
    # One quick retry covers a pooled connection the API server closed while idle.
    configuration.retries = 1
    return client.CustomObjectsApi(client.ApiClient(configuration))
