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


@pytest.fixture
def whole_reads(monkeypatch):
    """The groups whose pending rows were read whole (`tick_jobs.pending_jobs`), in order."""
    from job.store import tick_jobs

    seen = []
    pending_jobs = tick_jobs.pending_jobs
    monkeypatch.setattr(tick_jobs, "pending_jobs", lambda conn, group: seen.append(group) or pending_jobs(conn, group))
    return seen
