"""Log lines for `kubectl logs`: one line per event, key=value by default, JSON on request.

Call `event("placed", job=1, node="n1")`; the event name and fields make the line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

_logger = logging.getLogger("job")


def _quote(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, separators=(",", ":"))
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text)
    return text


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = {"ts": _timestamp(record), "level": record.levelname.lower(), "event": record.getMessage()}
        fields.update(getattr(record, "fields", {}))
        return " ".join(f"{key}={_quote(value)}" for key, value in fields.items())


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = {"ts": _timestamp(record), "level": record.levelname.lower(), "event": record.getMessage()}
        fields.update(getattr(record, "fields", {}))
        return json.dumps(fields, default=str, separators=(",", ":"))


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def configure(log_format: str = "text", level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if log_format == "json" else _TextFormatter())
    _logger.handlers[:] = [handler]
    _logger.setLevel(level)
    _logger.propagate = False


def _emit(level: int, event_name: str, fields: dict[str, object]) -> None:
    _logger.log(level, event_name, extra={"fields": fields})


def event(event_name: str, /, **fields: object) -> None:
    _emit(logging.INFO, event_name, fields)


def debug(event_name: str, /, **fields: object) -> None:
    _emit(logging.DEBUG, event_name, fields)


def warning(event_name: str, /, **fields: object) -> None:
    _emit(logging.WARNING, event_name, fields)


def error(event_name: str, /, **fields: object) -> None:
    _emit(logging.ERROR, event_name, fields)
