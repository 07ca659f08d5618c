import pytest

from job import log

pytest_plugins = ["fixtures_pg", "fixtures_ray", "fake_kubernetes"]


@pytest.fixture
def info_log():
    """Log lines at INFO, as text, on stderr: tests read them, and on a failure pytest shows them."""
    saved = log._logger
    log.configure("text", "INFO")
    yield
    log._logger = saved
