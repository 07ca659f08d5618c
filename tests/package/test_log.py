"""Log lines: key=value or JSON, one per event on stderr, ts, level and event first, level filtering."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pytest

from job import log

TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@pytest.fixture(autouse=True)
def restore_logger():
    saved = log._logger
    yield
    log._logger = saved


def lines(capsys) -> list[str]:
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.splitlines()


def test_text_line(capsys):
    log.configure("text", "INFO")
    log.event("placed", group="main", job=1, node="n1")
    [line] = lines(capsys)
    assert re.fullmatch(rf"ts={TS} level=info event=placed group=main job=1 node=n1", line), line


def test_json_line(capsys):
    log.configure("json", "INFO")
    log.warning("requeued", job=7, state="SUBMITTED", resources={"CPU": 0.5}, node=None)
    [line] = lines(capsys)
    assert list(json.loads(line)) == ["ts", "level", "event", "job", "state", "resources", "node"]
    assert re.fullmatch(rf'\{{"ts":"{TS}","level":"warning","event":"requeued","job":7,"state":"SUBMITTED",'
                        r'"resources":\{"CPU":0.5\},"node":null\}', line), line


@pytest.mark.parametrize("value, text", [
    ("n1", "n1"),
    ("", '""'),
    ("two words", '"two words"'),
    ('say "hi"', r'"say \"hi\""'),
    ("k=v", '"k=v"'),
    ("one\ntwo", r'"one\ntwo"'),
    ("a\tb", r'"a\tb"'),
    ("ünï/côdé:1", "ünï/côdé:1"),
    (3, "3"),
    (0.25, "0.25"),
    (True, "true"),
    (None, "null"),
    ([1, "x"], r'"[1,\"x\"]"'),
    ({"CPU": 1}, r'"{\"CPU\":1}"'),
])
def test_text_quoting(capsys, value, text):
    log.configure("text", "INFO")
    log.event("e", value=value)
    [line] = lines(capsys)
    assert line.split(" ", 3)[3] == f"value={text}"


@pytest.mark.parametrize("value, text", [
    ("a\x1b[2Jb", r'"a\u001b[2Jb"'),
    ("nul\x00", r'"nul\u0000"'),
    ("bell\x07", r'"bell\u0007"'),
    ("del\x7f", r'"del\u007f"'),
    ("c1\x9b31m", r'"c1\u009b31m"'),
    ("line\u2028break", r'"line\u2028break"'),
    ("\rcarriage", r'"\rcarriage"'),
])
def test_control_characters_are_escaped_never_written_raw(capsys, value, text):
    # Values from outside (a path, a header) reach the log: no byte of theirs may steer a terminal.
    log.configure("text", "INFO")
    log.warning("e", value=value)
    [line] = lines(capsys)
    assert line.split(" ", 3)[3] == f"value={text}"
    log.configure("json", "INFO")
    log.warning("e", value=value)
    [line] = lines(capsys)
    assert json.loads(line)["value"] == value and not any(c in line for c in "\x00\x1b\x07\x7f\x9b\u2028\r")


def test_json_values_keep_their_types(capsys):
    log.configure("json", "INFO")
    log.event("e", n=3, f=0.25, b=True, none=None, text="a b", items=[1, "x"])
    [line] = lines(capsys)
    assert {k: v for k, v in json.loads(line).items() if k not in ("ts", "level", "event")} == {
        "n": 3, "f": 0.25, "b": True, "none": None, "text": "a b", "items": [1, "x"]}


def test_exception_text_and_url_are_plain_values(capsys):
    # Passwords are redacted by the callers; the log writes what it is given, quoted as any value.
    log.configure("text", "INFO")
    cause = str(ConnectionError("ray at http://127.0.0.1:9 unreachable: connection failed"))
    log.error("group_failed", group="gone", cause=cause, url="postgresql://scheduler:***@db:5432/jobs")
    [line] = lines(capsys)
    assert line.split(" ", 3)[3] == ('group=gone cause="ray at http://127.0.0.1:9 unreachable: connection failed" '
                                     "url=postgresql://scheduler:***@db:5432/jobs")

    log.configure("json", "INFO")
    log.error("group_failed", cause=cause)
    [line] = lines(capsys)
    assert json.loads(line)["cause"] == cause


@pytest.mark.parametrize("level, shown", [
    ("DEBUG", ["debug", "info", "warning", "error"]),
    ("INFO", ["info", "warning", "error"]),
    ("warning", ["warning", "error"]),
    ("ERROR", ["error"]),
])
def test_level_filtering(capsys, level, shown):
    log.configure("text", level)
    log.debug("d")
    log.event("i")
    log.warning("w")
    log.error("e")
    assert [re.search(r"level=(\w+)", line).group(1) for line in lines(capsys)] == shown


def test_unknown_level_is_refused():
    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        log.configure("text", "LOUD")


def test_configure_switches_format(capsys):
    log.configure("json", "INFO")
    log.event("first", n=1)
    log.configure("text", "INFO")
    log.event("second", n=2)
    log.configure("json", "INFO")
    log.event("third", n=3)
    first, second, third = lines(capsys)
    assert json.loads(first)["event"] == "first"
    assert re.fullmatch(rf"ts={TS} level=info event=second n=2", second)
    assert json.loads(third)["n"] == 3


def test_lines_go_to_the_stderr_of_the_moment(monkeypatch):
    # pytest replaces sys.stderr for each test: a logger configured earlier must follow it.
    log.configure("text", "INFO")
    replaced = io.StringIO()
    monkeypatch.setattr(sys, "stderr", replaced)
    log.event("after")
    assert "event=after" in replaced.getvalue()


def test_before_configure_only_warnings_and_errors_are_written():
    code = "from job import log; log.debug('d'); log.event('i'); log.warning('w', n=1); log.error('e')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == ""
    assert [line.split(" ", 1)[1] for line in result.stderr.splitlines()] == ["level=warning event=w n=1", "level=error event=e"]
