"""A throw-away multi-node Ray cluster on this machine, for `python -m job demo` and the tests.

Each node is one `ray start --block` child in its own session, so that stop() can end exactly the
processes this cluster started, by their ids, and never another cluster sharing the machine
(`ray stop` would kill every Ray process of every user).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from job import log
from job.core.errors import JobError, Unavailable

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class NodeSpec:
    cpus: int
    resources: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    # Without these Ray sizes every node from the whole host's memory, and N nodes on one shared
    # machine would each claim most of it.
    memory_bytes: int = 1 * GIB
    object_store_bytes: int = 100 * MIB


def _free_ports(count: int, taken: set[int]) -> list[int]:
    """`count` ports free now and not in `taken`, which they join. A port handed out earlier may
    still be unbound (its Ray process has not started yet), and the kernel gives a closed port
    out again: two components of one node once got the same port and the head would not start."""
    # Bound on every address: Ray binds some ports on all interfaces, others on the host's own IP.
    # Every socket stays open until the last port is chosen, those refused too, so none comes twice.
    sockets = []
    chosen: list[int] = []
    try:
        while len(chosen) < count:
            s = socket.socket()
            sockets.append(s)
            s.bind(("", 0))
            port = s.getsockname()[1]
            if port not in taken:
                chosen.append(port)
                taken.add(port)
        return chosen
    finally:
        for s in sockets:
            s.close()


def _die_with_parent() -> None:
    # If the Python process that started the cluster is killed (SIGKILL, a test timeout that ends
    # the interpreter), `ray start --block` gets SIGTERM and takes its node down with it. The
    # signal follows the *thread* that started the child: start clusters from a thread that
    # outlives them, such as the main thread.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass
class _Node:
    name: str
    spec: NodeSpec
    role_args: list[str]
    process: subprocess.Popen
    log_path: Path
    starts: int = 1


class LocalRayCluster:
    """A head and workers as child processes. `start()` returns the dashboard URL once every node
    is ALIVE; `stop()` (or leaving the `with` block, also on Ctrl-C) ends every process it started."""

    # `ray start` of a worker gives up when its raylet has not registered within 30 s (fixed in
    # Ray), which happens on a busy shared machine; such a worker is started again.
    worker_starts = 3

    def __init__(self, head: NodeSpec, workers: list[NodeSpec], temp_dir: str | os.PathLike | None = None,
                 start_timeout_s: float = 180.0):
        self.head = head
        self.workers = list(workers)
        self.start_timeout_s = start_timeout_s
        self._own_temp_dir = temp_dir is None
        # Ray puts Unix sockets under the temp dir and their paths may not exceed ~107 characters:
        # a short directory of our own, never the shared /tmp/ray of other clusters. One directory
        # for all nodes, as on a real cluster where every host has /tmp/ray: the job agent of a
        # worker node reads driver logs under the *head's* session directory path.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp") if temp_dir is None else temp_dir)
        self.dashboard_url: str | None = None
        self.gcs_address: str | None = None
        self._nodes: list[_Node] = []
        # Every process ever started, dead ones too: stop() ends whatever they left behind.
        self._processes: list[subprocess.Popen] = []
        # Every port given to a node of this cluster, that no other node of it may get.
        self._ports: set[int] = set()
        self._started = 0.0

    def __enter__(self) -> LocalRayCluster:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> str:
        self._started = time.monotonic()
        try:
            gcs_port, dashboard_port, client_port = _free_ports(3, self._ports)
            self.gcs_address = f"127.0.0.1:{gcs_port}"
            self.dashboard_url = f"http://127.0.0.1:{dashboard_port}"
            self._spawn("head", self.head, [
                "--head", "--port", str(gcs_port), "--dashboard-host", "127.0.0.1",
                "--dashboard-port", str(dashboard_port), "--ray-client-server-port", str(client_port),
            ])
            # Workers wait for the head to be fully up: its dashboard start takes the CPU that a
            # worker's raylet needs to register in time on a two-core machine.
            self._wait_for_nodes(1)
            for index, spec in enumerate(self.workers):
                self._spawn(f"worker{index}", spec, ["--address", self.gcs_address])
            self._wait_for_nodes(1 + len(self.workers))
        except BaseException as exc:
            # A failed start keeps its logs for the person who reads the error.
            self._own_temp_dir = self._own_temp_dir and isinstance(exc, KeyboardInterrupt)
            self.stop()
            raise
        restarts = sum(node.starts - 1 for node in self._nodes)
        log.event("local_ray_started", dashboard=self.dashboard_url, nodes=len(self._nodes), restarts=restarts,
                  seconds=round(time.monotonic() - self._started, 1), temp_dir=str(self.temp_dir))
        return self.dashboard_url

    def _spawn(self, name: str, spec: NodeSpec, role_args: list[str]) -> None:
        node = _Node(name, spec, role_args, self._popen(name, spec, role_args), self.temp_dir / f"{name}.out")
        self._nodes.append(node)

    def _popen(self, name: str, spec: NodeSpec, role_args: list[str]) -> subprocess.Popen:
        # Nodes sharing a session directory each take the first free socket name (raylet.1,
        # raylet.2, ...) by looking at what exists; two doing it at once take the same one. So a
        # node is started once the one before it has bound its socket, a second or two into its
        # start, and the slow rest of the starts overlaps.
        sockets = self._socket_count()
        # Every port a node binds is its own: two nodes on one host (or another engineer's cluster)
        # asking for a fixed default such as the dashboard agent's 52365 break each other's job logs.
        node_manager, object_manager, agent_http, agent_grpc, runtime_env, metrics = _free_ports(6, self._ports)
        command = [
            sys.executable, "-m", "ray.scripts.scripts", "start", *role_args, "--block",
            "--node-ip-address", "127.0.0.1",
            "--num-cpus", str(spec.cpus), "--num-gpus", "0",
            "--resources", json.dumps(spec.resources),
            "--memory", str(spec.memory_bytes), "--object-store-memory", str(spec.object_store_bytes),
            "--node-manager-port", str(node_manager), "--object-manager-port", str(object_manager),
            "--dashboard-agent-listen-port", str(agent_http), "--dashboard-agent-grpc-port", str(agent_grpc),
            "--runtime-env-agent-port", str(runtime_env), "--metrics-export-port", str(metrics),
            "--temp-dir", str(self.temp_dir), "--disable-usage-stats", "--log-style", "record",
        ]
        if spec.labels:
            command += ["--labels", ",".join(f"{k}={v}" for k, v in spec.labels.items())]
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        with open(self.temp_dir / f"{name}.out", "ab") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       env=env, start_new_session=True, preexec_fn=_die_with_parent)
        self._processes.append(process)
        while self._socket_count() <= sockets and process.poll() is None:
            self._check_deadline()
            time.sleep(0.1)
        return process

    def _socket_count(self) -> int:
        return len(list(self.temp_dir.glob("session_*/sockets/raylet*")))

    def _check_deadline(self) -> None:
        if time.monotonic() - self._started > self.start_timeout_s:
            raise Unavailable(f"local Ray cluster not up within {self.start_timeout_s:.0f}s; logs in {self.temp_dir}")

    def _check_nodes(self) -> None:
        for node in self._nodes:
            if node.process.poll() is None:
                continue
            if node.name == "head" or node.starts >= self.worker_starts:
                tail = node.log_path.read_text(errors="replace")[-2000:]
                raise JobError(f"local Ray node {node.name} exited with status {node.process.returncode} "
                               f"after {node.starts} start(s) ({node.log_path}):\n{tail}")
            log.warning("local_ray_node_restart", node=node.name, status=node.process.returncode)
            node.starts += 1
            node.process = self._popen(node.name, node.spec, node.role_args)

    def _wait_for_nodes(self, expected: int) -> None:
        from job.adapters.ray_cluster import RayCluster

        assert self.dashboard_url is not None  # start() sets it first
        cluster = RayCluster(self.dashboard_url, timeout_s=5.0, retry_s=0.0)
        while True:
            self._check_nodes()
            self._check_deadline()
            try:
                # Alive in the state API comes a few seconds before the GCS reports a new node's
                # resources (`free`): until then a tick could not tell what runs there.
                nodes = cluster.nodes({}, use_head_node=True)
                if len(nodes) == expected and all(node.free is not None for node in nodes):
                    return
            except Unavailable:
                pass
            time.sleep(0.5)

    def stop(self) -> None:
        """End every process of this cluster: SIGTERM, a short grace period, then SIGKILL.

        Every process at once, not `ray start` alone: a node asked to stop drains for up to
        30 s while a job runs on it, which a throw-away cluster does not need."""
        if not self._processes:
            return
        processes = self.processes()
        _send(processes, signal.SIGTERM)
        _, alive = psutil.wait_procs(processes, timeout=3)
        # Survivors, with any child they started meanwhile.
        left = {p.pid: p for p in alive}
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                left.update((c.pid, c) for c in p.children(recursive=True))
        _send(list(left.values()), signal.SIGKILL)
        psutil.wait_procs(list(left.values()), timeout=5)
        for process in self._processes:
            process.wait(timeout=5)
        self._processes.clear()
        self._nodes.clear()
        log.event("local_ray_stopped", temp_dir=str(self.temp_dir), processes=len(processes), killed=len(left))
        if self._own_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def processes(self) -> list[psutil.Process]:
        """Every live process of this cluster: the `ray start` children and all their descendants.
        Raylet puts each worker in a process group of its own and job drivers run in sessions of
        their own, so a process-group kill alone would leave those behind."""
        found: dict[int, psutil.Process] = {}
        for process in self._processes:
            if process.poll() is not None:
                continue  # reaped: its pid may belong to someone else by now
            try:
                root = psutil.Process(process.pid)
                for p in [root, *root.children(recursive=True)]:
                    found[p.pid] = p
            except psutil.NoSuchProcess:
                pass
        return list(found.values())


def _send(processes: list[psutil.Process], sig: int) -> None:
    for p in processes:
        # psutil refuses when the pid now belongs to another process.
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(sig)
