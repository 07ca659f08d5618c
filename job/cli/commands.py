"""Every command with its family (the module of job/cli that declares its options and carries it
out) and its line in `--help`: the parser lists them all from here, and declares in full only the
family of the command that runs, so that a command imports what it needs and no other family's."""

from __future__ import annotations

# In the order `--help` lists them.
FAMILIES: dict[str, dict[str, str]] = {
    "migrate": {"migrate": "apply the SQL migrations, once each"},
    "jobs": {
        "submit": "put a job in the queue and print its id",
        "cancel": "cancel jobs: at once when pending, through Ray when running",
        "jobs": "list jobs, newest first",
        "show": "every field of one job, including why it waits",
    },
    "schedules": {"schedule": "submit a job on a cron expression or a period (add, list, show, pause, resume, remove)"},
    "groups": {"group": "manage resource groups"},
    "users": {"user": "manage users and their shares"},
    "accounts": {"account": "manage accounts (teams above users)"},
    "plan": {"plan": "run the planner on a snapshot file and print the plan (no database, no Ray)"},
    "simulate": {"simulate": "replay a workload through the planner and compare policies (no database, no Ray)"},
    "scheduler": {
        "tick": "run one tick over every resource group (the default command)",
        "loop": "run ticks until a deadline (what the CronJob runs)",
        "logs": "print a job's Ray driver logs",
    },
    "observe": {
        "share": "fair share per group and user: shares, usage, entitlement, jobs",
        "events": "what happened to a job and why, oldest first",
        "serve": "serve /metrics (Prometheus), /healthz and a status page at /, read only",
    },
    "prune": {"prune": "delete finished jobs older than a retention, a batch per transaction"},
    "gateway": {
        "gateway": "serve Ray's Job Submission API at /groups/GROUP: `ray job submit` and JobSubmissionClient submit "
                   "to the queue (bearer tokens: `token create`)",
        "token": "the gateway's bearer tokens",
    },
    "demo": {"demo": "run the scheduler on a local PostgreSQL and a local Ray cluster"},
}

HELP: dict[str, str] = {name: text for commands in FAMILIES.values() for name, text in commands.items()}
FAMILY_OF: dict[str, str] = {name: family for family, commands in FAMILIES.items() for name in commands}
