"""A throw-away multi-node Ray cluster on this machine, for `python -m job demo` and the tests.

Each node is one `ray start --block` child in its own session, so that stop() can end exactly the
processes this cluster started, by their ids, and never another cluster sharing the machine
(`ray stop` would kill every Ray process of every user).
"""

from __future__ import annotations

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
from job.errors import JobError, Unavailable

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


def _free_ports(count: int) -> list[int]:
    # All sockets stay open until every port is chosen, so the ports differ from each other.
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _die_with_parent() -> None:
    # If the Python process that started the cluster is killed (SIGKILL, a test timeout that ends
    # the interpreter), `ray start --block` gets SIGTERM and takes its node down with it. Popen is
    # always called from the thread that lives as long as the cluster: the signal follows the
    # creating *thread*.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class LocalRayCluster:
    """A head and workers as child processes. `start()` returns the dashboard URL once every node
    is ALIVE; `stop()` (or leaving the `with` block, also on Ctrl-C) ends every process it started."""

    def __init__(self, head: NodeSpec, workers: list[NodeSpec], temp_dir: str | os.PathLike | None = None,
                 start_timeout_s: float = 120.0):
        self.head = head
        self.workers = list(workers)
        self.start_timeout_s = start_timeout_s
        self._own_temp_dir = temp_dir is None
        # Ray puts Unix sockets under the temp dir and their paths may not exceed ~107 characters:
        # a short directory of our own, never the shared /tmp/ray of other clusters.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp") if temp_dir is None else temp_dir)
        self.dashboard_url: str | None = None
        self.gcs_address: str | None = None
        self._processes: list[subprocess.Popen] = []
        self._logs: list[Path] = []

    def __enter__(self) -> LocalRayCluster:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> str:
        started = time.monotonic()
        try:
            gcs_port, dashboard_port, client_port = _free_ports(3)
            self.gcs_address = f"127.0.0.1:{gcs_port}"
            self.dashboard_url = f"http://127.0.0.1:{dashboard_port}"
            self._spawn("head", self.head, [
                "--head", "--port", str(gcs_port), "--dashboard-host", "127.0.0.1",
                "--dashboard-port", str(dashboard_port), "--ray-client-server-port", str(client_port),
            ])
            self._wait_for_port(gcs_port, started)
            for index, spec in enumerate(self.workers):
                self._spawn(f"worker{index}", spec, ["--address", self.gcs_address])
            self._wait_for_nodes(started)
        except BaseException:
            self.stop()
            raise
        log.event("local_ray_started", dashboard=self.dashboard_url, nodes=1 + len(self.workers),
                  seconds=round(time.monotonic() - started, 1), temp_dir=str(self.temp_dir))
        return self.dashboard_url

    def _spawn(self, name: str, spec: NodeSpec, role_args: list[str]) -> None:
        # Every port a node binds is its own: two nodes on one host (or another engineer's cluster)
        # asking for a fixed default such as the dashboard agent's 52365 break each other's job logs.
        node_manager, object_manager, agent_http, agent_grpc, runtime_env, metrics = _free_ports(6)
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
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
        log_path = self.temp_dir / f"{name}.out"
        with open(log_path, "wb") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       env=env, start_new_session=True, preexec_fn=_die_with_parent)
        self._processes.append(process)
        self._logs.append(log_path)

    def _check_alive(self) -> None:
        for process, log_path in zip(self._processes, self._logs):
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise JobError(f"local Ray node exited with status {process.returncode} ({log_path}):\n{tail}")

    def _deadline_left(self, started: float) -> float:
        left = self.start_timeout_s - (time.monotonic() - started)
        if left <= 0:
            raise Unavailable(f"local Ray cluster not up within {self.start_timeout_s:.0f}s; logs in {self.temp_dir}")
        return left

    def _wait_for_port(self, port: int, started: float) -> None:
        # Workers can join as soon as the GCS listens; they start while the dashboard still loads.
        while True:
            self._check_alive()
            self._deadline_left(started)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)

    def _wait_for_nodes(self, started: float) -> None:
        from job.ray_adapter import RayCluster

        cluster = RayCluster(self.dashboard_url, timeout_s=5.0, retry_s=0.0)
        expected = 1 + len(self.workers)
        while True:
            self._check_alive()
            self._deadline_left(started)
            try:
                if len(cluster.nodes({}, use_head_node=True)) == expected:
                    return
            except Unavailable:
                pass
            time.sleep(0.5)

    def stop(self) -> None:
        """End every process of this cluster: SIGTERM, a grace period, then SIGKILL."""
        if not self._processes:
            return
        processes = self._our_processes()
        for p in processes:
            try:
                p.send_signal(signal.SIGTERM)
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(processes, timeout=10)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        for process in self._processes:
            process.wait(timeout=5)
        self._processes.clear()
        log.event("local_ray_stopped", temp_dir=str(self.temp_dir), killed=len(alive))
        if self._own_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _our_processes(self) -> list[psutil.Process]:
        # The `ray start` children and all their descendants. Raylet puts each worker in a process
        # group of its own, and job drivers run in sessions of their own, so a process-group kill
        # alone would leave those behind.
        found: dict[int, psutil.Process] = {}
        for process in self._processes:
            try:
                root = psutil.Process(process.pid)
                for p in [root, *root.children(recursive=True)]:
                    found[p.pid] = p
            except psutil.NoSuchProcess:
                pass
        return list(found.values())
