"""Log lines for `kubectl logs`: one line per event on stderr, key=value by default, JSON on request.

Call `event("placed", job=1, node="n1")`; the event name and fields make the line:

    ts=2026-11-29T08:00:00.123Z level=info event=placed job=1 node=n1
    {"ts":"2026-11-29T08:00:00.123Z","level":"info","event":"placed","job":1,"node":"n1"}

structlog does the work: a bound logger whose methods below the configured level do nothing
(a filtered-out `debug` costs a call), `add_log_level`, and `JSONRenderer`. Ours are the
millisecond timestamp (structlog's `TimeStamper` writes microseconds), the key order, and the
key=value renderer (structlog's `LogfmtRenderer` renders None as an empty value, True as a bare
flag and dicts with `str()`, and leaves tabs bare; these lines JSON-encode such values). Until
`configure` is called, warnings and errors are written as text lines and the rest is dropped.
structlog is imported at the first line logged: a command that logs nothing does without it.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


# What makes a value quoted: a space, a quote, `=`, and every control character (C0, DEL, C1 and
# the Unicode line breaks), which json.dumps escapes: a value from outside never writes them raw.
_NEEDS_QUOTES = re.compile('[ "=\x00-\x1f\x7f-\x9f\u2028\u2029]')


def _quote(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, separators=(",", ":"))
    if text == "" or _NEEDS_QUOTES.search(text):
        return json.dumps(text)
    return text


def _lead_with_ts_level_event(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """ts (UTC, milliseconds), level and event first, then the fields in the order given."""
    ts = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    level = event_dict.pop("level")
    return {"ts": ts, "level": level, "event": event_dict.pop("event"), **event_dict}


def _render_text(_: WrappedLogger, __: str, event_dict: EventDict) -> str:
    return " ".join(f"{key}={_quote(value)}" for key, value in event_dict.items())


class _Stderr:
    """Writes each line to whatever `sys.stderr` is at the time (pytest swaps it per test, and a
    line must never go to a closed stream), one line at a time across threads."""

    _lock = threading.Lock()

    def msg(self, line: str) -> None:
        with self._lock:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    debug = info = warning = error = msg


def _make_logger(log_format: str, level: str) -> Any:
    import structlog

    renderer = structlog.processors.JSONRenderer(default=str, separators=(",", ":")) if log_format == "json" else _render_text
    return structlog.wrap_logger(
        _Stderr(),
        processors=[structlog.processors.add_log_level, _lead_with_ts_level_event, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        context_class=dict,
    ).bind()


class _Configured:
    """The logger `configure` asked for, made when the first line is logged."""

    def __init__(self, log_format: str, level: str) -> None:
        name = level.upper()
        if name not in _LEVELS:
            raise ValueError(f"unknown log level {level!r}: use one of {', '.join(_LEVELS)}")
        self.log_format, self.level = log_format, name.lower()

    def __getattr__(self, method: str) -> Any:
        # Only reached through `_logger`, which the logger made then replaces.
        global _logger
        _logger = _make_logger(self.log_format, self.level)
        return getattr(_logger, method)


_logger: Any = _Configured("text", "WARNING")


def configure(log_format: str = "text", level: str = "INFO") -> None:
    """`text` (key=value) or `json` lines, from `level` (DEBUG, INFO, WARNING, ERROR) up."""
    global _logger
    _logger = _Configured(log_format, level)


def event(event_name: str, /, **fields: object) -> None:
    _logger.info(event_name, **fields)


def debug(event_name: str, /, **fields: object) -> None:
    _logger.debug(event_name, **fields)


def warning(event_name: str, /, **fields: object) -> None:
    _logger.warning(event_name, **fields)


def error(event_name: str, /, **fields: object) -> None:
    _logger.error(event_name, **fields)
