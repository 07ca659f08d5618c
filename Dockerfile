# The scheduler image: `python -m job COMMAND`; with no arguments it runs the CronJob's loop.
# Build: docker build -t REGISTRY/job-scheduler:TAG .   (docs/operations/kubernetes.md)
#
# Pinned to the patch release so a rebuild gets the same interpreter; requirements.lock is made
# for CPython 3.11 on Linux x86_64, so a move to another minor version regenerates it too.
FROM python:3.11.14-slim-bookworm

# No .pyc writes at run time: the pod's root filesystem is read-only (the code is compiled below).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app

# Wheels only: the slim base has no compiler, and a wheel installs the same way every time.
COPY requirements.lock /tmp/requirements.lock
RUN python -m pip install --no-cache-dir --only-binary=:all: -r /tmp/requirements.lock \
    && rm /tmp/requirements.lock

# The package runs from source under /app (PYTHONPATH). sql/ becomes the package job.migrations,
# as pyproject.toml maps it in the wheel: `python -m job migrate` reads it through importlib.resources.
# The development helpers (job/devtools) stay out: .dockerignore leaves them out of the context.
WORKDIR /app
COPY job/ /app/job/
COPY sql/ /app/job/migrations/
# Compiled at build time since the pod cannot write .pyc files; a numeric user so that the
# kubelet can check the pod's runAsNonRoot.
RUN python -m compileall -q /app/job \
    && useradd --system --uid 10001 --user-group --no-create-home --home-dir /tmp --shell /usr/sbin/nologin job
USER 10001:10001

ENTRYPOINT ["python", "-m", "job"]
CMD ["loop", "--for", "75s", "--every", "5s"]
