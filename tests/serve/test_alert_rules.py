"""The alert rules agree with the loop's exit status (scheduler/loop.py), by `promtool test rules`
on series as the metrics give them: a loop that rode out a fault (a minute of failed ticks, then
ticks again: the loop exits 0) raises no alert; a group that could not be scheduled at all for
its windows (every tick failed, the loops exit 1) raises both the no-tick and the failing alerts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

RULES = Path(__file__).resolve().parents[2] / "k8s" / "monitoring" / "alert-rules.yaml"

# One scrape a minute; the CronJob's loops tick 12 times a minute.
RODE_OUT = {
    # A database outage of about a minute: no tick in minute 3, then ticks again.
    'job_ticks_total{group="g",outcome="ticked"}': "0 12 24 24 36 48 60 72 84 96 108 120 132 144 156 168 180 192 204 216 228",
    'job_ticks_total{group="g",outcome="failed"}': "0 0 0 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3",
    "job_last_successful_tick_timestamp_seconds{group=\"g\"}": "0 60 120 120 240 300 360 420 480 540 600 660 720 780 840"
                                                               " 900 960 1020 1080 1140 1200",
}
NEVER = {
    # From minute 2 on, every tick of the group fails.
    'job_ticks_total{group="g",outcome="ticked"}': "0 12 24 24 24 24 24 24 24 24 24 24 24 24 24 24 24 24 24 24 24",
    'job_ticks_total{group="g",outcome="failed"}': "0 0 0 12 24 36 48 60 72 84 96 108 120 132 144 156 168 180 192 204 216",
    "job_last_successful_tick_timestamp_seconds{group=\"g\"}": "0 60 120 120 120 120 120 120 120 120 120 120 120 120 120"
                                                               " 120 120 120 120 120 120",
}


ALERTS = {rule["alert"]: rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}


def _annotations(alert: str, value: str) -> dict[str, str]:
    """The rule's annotations as Prometheus fills them in for group g and this value."""
    return {key: text.replace("{{ $labels.group }}", "g").replace("{{ $value | humanizeDuration }}", value)
            for key, text in ALERTS[alert]["annotations"].items()}


# At 18 minutes, the failing group's last successful tick was at 2.
AGE = "16m 0s"


def _case(series: dict[str, str], expected: dict[str, tuple[bool, str]]) -> dict:
    return {
        "interval": "1m",
        "input_series": [{"series": name, "values": values} for name, values in series.items()],
        "alert_rule_test": [
            {"eval_time": "18m", "alertname": alert,
             "exp_alerts": [{"exp_labels": {"group": "g", "severity": severity},
                             "exp_annotations": _annotations(alert, AGE)}] if firing else []}
            for alert, (firing, severity) in expected.items()
        ],
    }


def test_the_alerts_fire_when_the_loop_exits_1_and_not_for_faults_it_rode_out(tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is needed: apt-get install prometheus (Debian's package)"
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            _case(RODE_OUT, {"JobSchedulerNoTick": (False, "critical"), "JobSchedulerGroupFailing": (False, "warning")}),
            _case(NEVER, {"JobSchedulerNoTick": (True, "critical"), "JobSchedulerGroupFailing": (True, "warning")}),
        ],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests))
    checked = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The check can fail: the failing group's series expected to raise no alert.
    tests["tests"] = [_case(NEVER, {"JobSchedulerGroupFailing": (False, "warning")})]
    path.write_text(yaml.safe_dump(tests))
    assert subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, timeout=60).returncode != 0
