"""`python -m job demo` where the development helpers cannot be imported (no `demo` extra, or the
image): one line that says what to install, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys

# psutil blocked as if not installed, then the CLI as `python -m job` runs it.
CODE = "import sys; sys.modules['psutil'] = None; from job.cli import main; raise SystemExit(main(['demo']))"


def test_demo_without_its_extra_says_what_to_install():
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr == ("error: demo: job.devtools needs psutil: install the `demo` extra "
                             "(pip install 'job[demo]')\n")
