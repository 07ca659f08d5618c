"""Ray's real answers (recorded from a local cluster by record_ray_answers.py into ray_answers.json),
each played back by a local HTTP server: a refusal of the request is a refusal (RaySubmitRefused,
asked once), Ray's own 500 is a failure of Ray, and only no answer at all is "unreachable"."""

from __future__ import annotations

import json
import socket
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from job.adapters.ray_cluster import RayCluster, RaySubmitRefused
from job.core.errors import Unavailable

ANSWERS = {answer["case"]: answer for answer in json.loads(Path(__file__).with_name("ray_answers.json").read_text())}


@contextmanager
def answering(answer: dict):
    """A dashboard that gives every request this recorded answer; yields (url, requests seen)."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.command, self.path))
            body = answer["text"].encode()
            self.send_response(answer["status"])
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


def submit(cluster: RayCluster):
    return cluster.submit(submission_id="inst-1-1", entrypoint="true", node_id="n", resources={"CPU": 1},
                          runtime_env={}, metadata={})


# case -> (call, what it returns or raises, words of its message, requests Ray gets)
TABLE = {
    "entrypoint_too_large": (submit, RaySubmitRefused, "HTTPRequestEntityTooLarge: Request Entity Too Large", 1),
    "invalid_label_selector": (submit, RaySubmitRefused, "Invalid label selector value `in(,`", 1),
    "runtime_env_not_a_dict": (submit, RaySubmitRefused, "runtime_env must be a dict", 1),
    "unknown_field": (submit, RaySubmitRefused, "unexpected keyword argument 'no_such_field'", 1),
    "duplicate_submission_id": (submit, False, None, 1),
    "negative_cpus": (submit, True, None, 1),
    # Ray's own trouble: retried, then a failure of Ray's, with its answer, not "unreachable".
    "not_json": (submit, Unavailable, "failed submit: HTTP 500: Server got itself in trouble", 2),
    "unknown_job": (lambda cluster: cluster.job("inst-1-1"), None, None, 1),
    "stop_unknown_job": (lambda cluster: cluster.stop("inst-1-1"), False, None, 1),
}


@pytest.mark.parametrize("case", sorted(TABLE))
def test_ray_s_recorded_answers(case):
    call, expected, words, asked = TABLE[case]
    answer = ANSWERS[case]
    with answering(answer) as (url, seen):
        cluster = RayCluster(url, timeout_s=5.0, retry_s=0.5)
        if isinstance(expected, type):
            with pytest.raises(expected) as raised:
                call(cluster)
            assert words in str(raised.value) and "unreachable" not in str(raised.value)
            assert "Traceback" not in str(raised.value)
        else:
            assert call(cluster) is expected
    assert len(seen) == asked if asked == 1 else len(seen) >= 2, seen
    assert next(method for method, _ in seen) == answer["method"]


def test_no_answer_is_unreachable():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(Unavailable, match=r"unreachable: connection failed"):
        submit(RayCluster(f"http://127.0.0.1:{port}", timeout_s=1.0, retry_s=0.3))
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        with pytest.raises(Unavailable, match=r"unreachable: timed out"):
            submit(RayCluster(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.3, retry_s=0.3))
