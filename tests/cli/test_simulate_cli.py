"""`python -m job simulate` end to end: a generated trace, an SWF and a CSV file written here,
--json, --plot, and bad input refused with one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from job.cli import simulate as simulate_cli
from tests.cli_helpers import run_cli, run_process


def swf(path, jobs: int = 40) -> str:
    lines = ["; Version: 2.2", "; MaxProcs: 16"]
    for number in range(1, jobs + 1):
        fields = [number, number * 7, -1, 60 + (number * 37) % 400, -1, -1, -1, 1 + number % 8, -1, -1, 1,
                  number % 5, -1, -1, -1, -1, -1, -1]
        lines.append(" ".join(str(field) for field in fields))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_generated_trace_compared_under_three_policies_as_a_process():
    result = run_process("simulate", "--generate", "400", "--seed", "2", "--load", "1.5", "--compare", "policy=fifo",
                         "--compare", "policy=drf", "--compare", "policy=fairshare,half_life=1h")
    assert result.status == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("400 jobs from 4 users on 4 nodes (CPU 128, GPU 32, memory 1 TiB)")
    assert lines[1].split()[:4] == ["CONFIGURATION", "WAIT_MEAN", "WAIT_P50", "WAIT_P95"]
    assert [line.split()[0] for line in lines[2:]] == ["policy=fifo", "policy=drf", "policy=fairshare,half_life=1h"]


def test_an_swf_file_as_a_process_with_json(tmp_path):
    result = run_process("simulate", swf(tmp_path / "w.swf"), "--nodes", "2x{CPU:8}", "--policy", "drf", "--json")
    assert result.status == 0, result.err
    document = json.loads(result.out)
    assert document["trace"] == {"jobs": 40, "users": 5, "skipped": 0}
    assert (document["nodes"], document["totals"], document["every_s"], document["window_s"]) == (2, {"CPU": 16.0}, 5.0, 3600.0)
    [configuration] = document["configurations"]
    assert configuration["name"] == "policy=drf"
    assert configuration["group"]["policy"] == "drf" and configuration["group"]["half_life_s"] == 3600
    figures = configuration["figures"]
    assert set(figures) == {
        "jobs", "started", "unschedulable", "never_started", "wait_mean_s", "wait_p50_s", "wait_p95_s",
        "completion_mean_s", "bounded_slowdown_mean", "makespan_s", "utilization", "jain", "jain_window_mean",
        "jain_windows", "deviation_max", "deviation_mean", "preemptions", "lost_run_s", "ticks", "plans", "events",
        "users", "accounts", "dependency_failed"}
    assert (figures["jobs"], figures["started"]) == (40, 40)
    assert figures["events"] == 120  # each job arrives, starts and ends
    assert 0 < figures["utilization"]["CPU"] <= 1
    assert configuration["events_per_s"] > 0


def test_a_csv_file_with_group_options_and_compare(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("submit_time,user,resources,run_time\n" + "".join(
        f'{n},{"ab"[n % 2]},"CPU:{1 + n % 3},memory:1GiB",{30 + n}\n' for n in range(30)))
    result = run_cli(capsys, "simulate", str(trace), "--nodes", "1x{CPU:4,memory:8GiB}", "--max-running-per-user", "2",
                     "--json", "--compare", "policy=fifo", "--compare", "policy=drf,strict_order=true",
                     "--compare", "max_resources_per_user=CPU=2,max-resources-per-user=memory=4GiB")
    assert result.status == 0, result.err
    configurations = json.loads(result.out)["configurations"]
    groups = [configuration["group"] for configuration in configurations]
    assert [group["max_running_per_user"] for group in groups] == [2, 2, 2]
    assert groups[1]["strict_order"] is True and groups[1]["policy"] == "drf"
    assert groups[2]["max_resources_per_user"] == {"CPU": 2.0, "memory": 4.0 * 2**30}
    assert [configuration["figures"]["started"] for configuration in configurations] == [30, 30, 20]
    # The jobs asking for CPU 3 can never start under a limit of CPU 2 per user.
    assert configurations[2]["figures"]["never_started"] == 10


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<svg")])
def test_plot_writes_the_file(tmp_path, capsys, suffix, magic):
    pytest.importorskip("matplotlib")
    path = tmp_path / f"shares{suffix}"
    result = run_cli(capsys, "simulate", "--generate", "200", "--window", "10m", "--plot", str(path),
                     "--compare", "policy=fifo", "--compare", "policy=drf")
    assert result.status == 0, result.err
    assert result.out.splitlines()[-1] == f"plot written to {path}"
    assert magic in path.read_bytes()[:400]


def test_plot_without_matplotlib_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; from job.cli import main; "
            f"raise SystemExit(main(['simulate', '--generate', '50', '--plot', {str(tmp_path / 'p.png')!r}]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "error: --plot needs matplotlib, which is not installed: pip install 'job[plot]'\n"
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("argv, message", [
    (["--generate", "10", "--plot", "p.pdf"], "--plot: p.pdf: the file must end in .png or .svg"),
    (["--generate", "10", "--compare", "colour=red"],
     "--compare colour=red: 'colour=red': expected KEY=VALUE with KEY one of default_class, half_life, max_preemptions, "
     "max_reservations, max_resources_per_user, max_running_per_user, min_runtime, policy, preemption, priority_class, "
     "reserve_after, resource_priority, selector, strict_order"),
    (["--generate", "10", "--compare", "policy=best"],
     "--compare policy=best: policy: Input should be 'fifo', 'lifo', 'drf' or 'fairshare'"),
    (["--generate", "10", "--compare", "policy=drf", "--compare", "policy=drf"], "--compare: a configuration is given twice"),
    (["--generate", "10", "--half-life", "soon"], "options: half_life_s: not a duration: 'soon' (use e.g. 90s, 5m, 1h30m, 2d)"),
    (["--generate", "10", "--every", "0"], "--every: must be more than 0"),
    (["--generate", "10", "--nodes", "@missing.json"], "--nodes: cannot read missing.json: No such file or directory"),
    # Never ending: refused at its bound, not read into memory whole.
    (["--generate", "10", "--nodes", "@/dev/zero"], "--nodes: cannot read /dev/zero: larger than 64 MiB"),
    (["--generate", "10", "--load", "0"], "--load: must be above 0 and at most 100, got 0"),
    ([], "simulate: give a TRACE file or --generate N"),
    (["t.csv", "--generate", "10"], "simulate: give a TRACE file or --generate N, not both"),
    (["missing.csv"], "missing.csv: No such file or directory"),
])
def test_bad_input_is_refused_with_one_line(capsys, argv, message):
    result = run_cli(capsys, "simulate", *argv)
    assert (result.status, result.out, result.err) == (2, "", f"error: {message}\n")


def test_a_trace_past_its_bound_is_refused_unread(capsys, monkeypatch):
    monkeypatch.setattr(simulate_cli, "MAX_TRACE_FILE", 2**20)
    result = run_cli(capsys, "simulate", "/dev/zero")
    assert (result.status, result.out, result.err) == (2, "", "error: /dev/zero: larger than 1 MiB\n")


@pytest.mark.parametrize("value, says", [("99999999999", "'99999999999': at most 10000000"),
                                         ("\u00b2", "'\u00b2' is not a whole number above zero")])
def test_a_generated_trace_is_bounded_before_it_is_made(capsys, value, says):
    with pytest.raises(SystemExit) as exited:
        run_cli(capsys, "simulate", "--generate", value)
    assert exited.value.code == 2 and capsys.readouterr().err.strip().endswith(f"argument --generate: {says}")


def test_a_bad_trace_line_is_refused_with_its_line_and_field(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("0,alice,CPU:1,5\n3,bob,CPU:1,soon\n")
    result = run_cli(capsys, "simulate", str(trace))
    assert result.status == 2
    assert result.err == f"error: {trace} line 2: run_time: not a duration: 'soon' (use e.g. 90s, 5m, 1h30m, 2d)\n"


def test_priority_classes_and_preemption_from_a_csv_trace(tmp_path, capsys):
    # A long low-class job holds the one node; a high-class job comes later. With preemption the
    # low one is stopped (once, after 15 s) and runs again after the high one.
    trace = tmp_path / "t.csv"
    trace.write_text('0,alice,CPU:4,100,0,low\n10,bob,CPU:4,20,0,high\n')
    classes = ["--priority-class", "high=10:non-preemptible", "--priority-class", "low=0", "--default-class", "low"]
    result = run_cli(capsys, "simulate", str(trace), "--nodes", "1x{CPU:4}", *classes, "--min-runtime", "0", "--json",
                     "--compare", "preemption=off", "--compare", "preemption=priority")
    assert result.status == 0, result.err
    calm, preempting = (configuration["figures"] for configuration in json.loads(result.out)["configurations"])
    assert (calm["preemptions"], calm["lost_run_s"], calm["wait_mean_s"]) == (0, 0, 45)
    assert (preempting["preemptions"], preempting["lost_run_s"], preempting["wait_mean_s"]) == (1, 15, 20)


def test_a_class_the_configuration_lacks_is_refused(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("0,alice,CPU:1,5,0,gold\n")
    result = run_cli(capsys, "simulate", str(trace), "--compare", "policy=drf")
    assert (result.status, result.out) == (2, "")
    assert result.err == (f"error: {trace}: job 1: class 'gold' is not one of the group's priority classes (default) "
                          "(configuration policy=drf)\n")


def test_a_gang_trace_as_a_process(tmp_path):
    trace = tmp_path / "gangs.csv"
    # Two gangs of two 2-CPU bundles on separate nodes, on two 2-CPU nodes: one after the other;
    # then a plain job, and a gang no two nodes can hold (unschedulable).
    trace.write_text("submit_time,user,resources,run_time,priority,class,max_runtime,bundles,bundle_strategy\n"
                     "0,alice,CPU:0,100,,,,2xCPU:2,STRICT_SPREAD\n"
                     "0,bob,CPU:0,50,,,,2xCPU:2,STRICT_SPREAD\n"
                     '10,carol,CPU:1,10\n'
                     '20,dave,CPU:0,10,,,,"3xCPU:1;CPU:2",STRICT_SPREAD\n')
    jobs = tmp_path / "jobs.csv"
    result = run_process("simulate", str(trace), "--nodes", "2x{CPU:2}", "--policy", "fifo", "--json",
                         "--jobs-out", str(jobs))
    assert result.status == 0, result.err
    [configuration] = json.loads(result.out)["configurations"]
    assert (configuration["figures"]["started"], configuration["figures"]["unschedulable"]) == (3, 1)
    rows = [line.split(",")[:5] for line in jobs.read_text().splitlines()[1:]]
    assert [(row[0], row[3]) for row in rows] == [("1", "0"), ("2", "100"), ("3", "150"), ("4", "")]


def test_a_pipeline_trace_as_a_process(tmp_path):
    trace = tmp_path / "pipeline.csv"
    # Preparation, a sweep of six tasks at most two at once, an evaluation of the whole sweep; a
    # report only if preparation fails (it does not: the report fails, never started).
    trace.write_text("submit_time,user,resources,run_time,id,after,array\n"
                     "0,ann,CPU:1,60,prep,,\n"
                     "0,ann,CPU:1,100,sweep,prep,0-5%2\n"
                     "0,ann,CPU:4,30,eval,sweep,\n"
                     "0,ann,CPU:1,10,report,prep:fail,\n")
    jobs = tmp_path / "jobs.csv"
    result = run_process("simulate", str(trace), "--nodes", "1x{CPU:8}", "--json", "--jobs-out", str(jobs))
    assert result.status == 0, result.err
    [configuration] = json.loads(result.out)["configurations"]
    figures = configuration["figures"]
    assert (figures["jobs"], figures["started"], figures["dependency_failed"], figures["never_started"]) == (9, 8, 1, 0)
    rows = [line.split(",") for line in jobs.read_text().splitlines()]
    assert rows[0] == ["id", "user", "submit_time", "start_time", "end_time", "state"]
    assert [(row[0], row[3], row[4], row[5]) for row in rows[1:]] == [
        ("prep", "0", "60", "SUCCEEDED"), ("sweep_0", "60", "160", "SUCCEEDED"), ("sweep_1", "60", "160", "SUCCEEDED"),
        ("sweep_2", "160", "260", "SUCCEEDED"), ("sweep_3", "160", "260", "SUCCEEDED"),
        ("sweep_4", "260", "360", "SUCCEEDED"), ("sweep_5", "260", "360", "SUCCEEDED"), ("eval", "360", "390", "SUCCEEDED"),
        ("report", "", "", "FAILED")]
