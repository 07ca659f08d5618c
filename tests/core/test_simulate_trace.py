"""Traces as text: CSV and the Standard Workload Format, good and bad lines; nodes as text; the
generated trace."""

from __future__ import annotations

import pytest

from job.core.dependencies import When
from job.core.errors import BadInput
from job.core.simulate.cluster import parse_nodes, parse_nodes_json
from job.core.simulate.generate import generate
from job.core.simulate.trace import EPOCH, Dependency, TraceJob, parse_csv, parse_swf

GIB = 2**30


@pytest.mark.parametrize("text, expected", [
    ('0,alice,"CPU:4,memory:8GiB",90\n',
     [TraceJob.at("1", "alice", 0.0, {"CPU": 4.0, "memory": 8.0 * GIB}, 90.0)]),
    ('submit_time,user,resources,run_time,priority,class\n5m,bob,"{GPU:1,CPU:2}",1h30m,3,batch\n',
     [TraceJob.at("1", "bob", 300.0, {"GPU": 1.0, "CPU": 2.0}, 5400.0, 3, "batch")]),
    ("# a comment\n\n1.5,carol,CPU:0.5,2\n2,dave,CPU:1,3,,\n",
     [TraceJob.at("1", "carol", 1.5, {"CPU": 0.5}, 2.0), TraceJob.at("2", "dave", 2.0, {"CPU": 1.0}, 3.0)]),
])
def test_csv_good_lines(text, expected):
    assert parse_csv(text, "t.csv").jobs == expected


@pytest.mark.parametrize("run_s, max_runtime_s, runs_s, cut", [
    (90.0, None, 90.0, False),
    (90.0, 90.0, 90.0, False),
    (90.0, 120.0, 90.0, False),
    (90.0, 60.0, 60.0, True),
])
def test_a_replayed_job_runs_until_its_max_runtime_cuts_it(run_s, max_runtime_s, runs_s, cut):
    job = TraceJob.at("1", "ann", 0.0, {"CPU": 1.0}, run_s, max_runtime_s=max_runtime_s)
    assert (job.runs_s, job.cut) == (runs_s, cut)


@pytest.mark.parametrize("text, message", [
    ("0,alice,CPU:1\n",
     "t.csv line 1: expected 4 to 7 fields (submit_time,user,resources,run_time,priority,class,max_runtime), got 3"),
    ("0,alice,CPU:1,5\nsoon,bob,CPU:1,5\n", "t.csv line 2: submit_time: not a duration: 'soon' (use e.g. 90s, 5m, 1h30m, 2d)"),
    ("0,alice,CPU:1,-5\n", "t.csv line 1: run_time: not a duration: '-5' (use e.g. 90s, 5m, 1h30m, 2d)"),
    ("0,,CPU:1,5\n", "t.csv line 1: user: empty"),
    ("0,alice,CPU,5\n", "t.csv line 1: resources: expected NAME:AMOUNT, got 'CPU'"),
    ("0,alice,cpu:1,5\n", "t.csv line 1: resources: unknown resource 'cpu': did you mean 'CPU'?"),
    ("0,alice,CPU:-1,5\n", "t.csv line 1: resources: CPU: must be finite and not negative, got '-1'"),
    ('0,alice,"CPU:1,CPU:2",5\n', "t.csv line 1: resources: 'CPU' given twice"),
    ("0,alice,CPU:0,5\n", "t.csv line 1: resources: ask for more than nothing: at least one amount above zero"),
    ("0,alice,CPU:1,5,high\n", "t.csv line 1: priority: not a whole number: 'high'"),
])
def test_csv_bad_lines_name_the_line_and_field(text, message):
    with pytest.raises(BadInput) as error:
        parse_csv(text, "t.csv")
    assert str(error.value) == message


def swf_line(number=1, submit=0, wait=5, run=100, allocated=4, requested=4, user=7) -> str:
    fields = [number, submit, wait, run, allocated, -1, -1, requested, 200, -1, 1, user, 1, 1, 1, 1, -1, -1]
    return " ".join(str(field) for field in fields)


@pytest.mark.parametrize("text, expected", [
    ('0,alice,CPU:0,60,,,,"2xCPU:2;GPU:1,CPU:4",STRICT_SPREAD\n',
     [TraceJob.at("1", "alice", 0.0, {}, 60.0, bundles=({"CPU": 2.0}, {"CPU": 2.0}, {"GPU": 1.0, "CPU": 4.0}),
               bundle_strategy="STRICT_SPREAD")]),
    ("0,bob,CPU:1,5,,,,CPU:1;memory:1GiB\n",
     [TraceJob.at("1", "bob", 0.0, {"CPU": 1.0}, 5.0, bundles=({"CPU": 1.0}, {"memory": float(GIB)}), bundle_strategy="PACK")]),
    ("0,carol,CPU:1,5,,,,,\n", [TraceJob.at("1", "carol", 0.0, {"CPU": 1.0}, 5.0)]),
])
def test_csv_bundles(text, expected):
    assert parse_csv(text, "t.csv").jobs == expected


@pytest.mark.parametrize("text, message", [
    ("0,a,CPU:1,5,,,,CPU\n", "t.csv line 1: bundles: expected [Nx]NAME:AMOUNT,..., got 'CPU'"),
    ("0,a,CPU:1,5,,,,0xCPU:1\n",
     "t.csv line 1: bundles: '0xCPU:1': give 1 to 64 bundles of NAME:AMOUNT,..., e.g. 2xCPU:2;GPU:1,CPU:4"),
    ("0,a,CPU:1,5,,,,CPU:1;;CPU:2\n",
     "t.csv line 1: bundles: '': give 1 to 64 bundles of NAME:AMOUNT,..., e.g. 2xCPU:2;GPU:1,CPU:4"),
    ("0,a,CPU:1,5,,,,40xCPU:1;40xCPU:1\n", "t.csv line 1: bundles: at most 64 bundles, got 80"),
    ("0,a,CPU:1,5,,,,cpu:1\n", "t.csv line 1: bundles: bundle 1: unknown resource 'cpu': did you mean 'CPU'?"),
    ("0,a,CPU:1,5,,,,CPU:1;CPU:0\n",
     "t.csv line 1: bundles: bundle 2: ask for more than nothing: at least one amount above zero (e.g. CPU=1)"),
    ("0,a,CPU:1,5,,,,,PACK\n", "t.csv line 1: bundle_strategy: a strategy places bundles: give them too (the bundles column)"),
    ("0,a,CPU:1,5,,,,CPU:1,pack\n",
     "t.csv line 1: bundle_strategy: 'pack' is not a strategy: use PACK, SPREAD, STRICT_PACK, STRICT_SPREAD"),
    ("0,a,CPU:1,5,,,,CPU:1,PACK,x,,,y\n", "t.csv line 1: expected 4 to 12 fields "
     "(submit_time,user,resources,run_time,priority,class,max_runtime,bundles,bundle_strategy,id,after,array), got 13"),
])
def test_csv_bad_bundles_name_the_line_and_field(text, message):
    with pytest.raises(BadInput) as error:
        parse_csv(text, "t.csv")
    assert str(error.value) == message


def test_swf_good_lines_and_skipped_jobs():
    text = "\n".join([
        "; Version: 2.2", "; Computer: test", "",
        swf_line(1, submit=0, run=100, requested=4, user=7),
        swf_line(2, submit=30, run=50, allocated=8, requested=-1, user=3),  # not requested: allocated
        swf_line(3, submit=40, run=-1),  # cancelled before it ran
        swf_line(4, submit=50, run=10, allocated=-1, requested=-1),  # no processors
    ])
    trace = parse_swf(text, "w.swf")
    # Field 9, the requested time (200 s in every line), is the max runtime.
    assert trace.jobs == [TraceJob.at("1", "u7", 0.0, {"CPU": 4.0}, 100.0, max_runtime_s=200.0),
                          TraceJob.at("2", "u3", 30.0, {"CPU": 8.0}, 50.0, max_runtime_s=200.0)]
    assert trace.skipped == 2


@pytest.mark.parametrize("text, message", [
    ("1 0 5 100\n", "w.swf line 1: expected the 18 fields of the Standard Workload Format, got 4"),
    (swf_line().replace(" 100 ", " ten ", 1) + "\n", "w.swf line 1: field 4 (run time): not a number: 'ten'"),
    ("; header\n" + swf_line(submit=-3) + "\n", "w.swf line 2: field 2 (submit time): must not be negative, got '-3'"),
    (swf_line(1) + "\n" + swf_line(1) + "\n", "w.swf: job number 1 appears more than once"),
    # Python's float() reads these; the replay cannot (a traceback before: an infinite CPU count).
    (swf_line(run="inf") + "\n", "w.swf line 1: field 4 (run time): not a number: 'inf'"),
    (swf_line().replace(" 200 ", " nan ", 1) + "\n", "w.swf line 1: field 9 (requested time): not a number: 'nan'"),
    (swf_line(requested="1e308") + "\n",
     "w.swf line 1: field 8 (processors): CPU: at most 922337203685477 (the most Ray can count), got 1e+308"),
    (swf_line(allocated="1e308", requested=-1) + "\n", "w.swf line 1: field 5 (processors): CPU: at most"),
    (swf_line(run="1e12") + "\n", "w.swf line 1: field 4 (run time): a duration must be at most 100 years"),
])
def test_swf_bad_lines_name_the_line_and_field(text, message):
    with pytest.raises(BadInput) as error:
        parse_swf(text, "w.swf")
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize("text, expected", [
    ("2x{CPU:4}", [("n0001", {"CPU": 4.0}), ("n0002", {"CPU": 4.0})]),
    ("1x{CPU:32,GPU:8,memory:1GiB} + {CPU:2}", [("n0001", {"CPU": 32.0, "GPU": 8.0, "memory": float(GIB)}),
                                               ("n0002", {"CPU": 2.0})]),
])
def test_nodes_as_text(text, expected):
    assert [(node.id, node.resources) for node in parse_nodes(text)] == expected


@pytest.mark.parametrize("text, message", [
    ("4{CPU:4}", "--nodes: expected COUNTx{NAME:AMOUNT,...}, e.g. 4x{CPU:32,GPU:8,memory:256GiB}; got '4{CPU:4}'"),
    ("0x{CPU:4}", "--nodes: at least one node of each kind, got '0x{CPU:4}'"),
    ("2x{CPU:lots}", "--nodes: CPU: not a number: 'lots'"),
    # Refused before a node is made: `100000000x{CPU:1}` ran for minutes making them.
    ("100000000x{CPU:1}", "--nodes: at most 100000 nodes in all"),
    ("9" * 5000 + "x{CPU:1}", "--nodes: at most 100000 nodes in all"),
    ("60000x{CPU:1} + 40001x{CPU:2}", "--nodes: at most 100000 nodes in all"),
])
def test_bad_nodes_as_text(text, message):
    with pytest.raises(BadInput) as error:
        parse_nodes(text)
    assert str(error.value) == message


@pytest.mark.parametrize("text, message", [
    ('[{"id": "a", "resources": {"CPU": -1}}]', "nodes.json: [0].resources.CPU: Input should be greater than or equal to 0"),
    ('[{"id": "a", "resources": {}}, {"id": "a", "resources": {}}]', "nodes.json: a node id appears more than once"),
    ("[]", "nodes.json: no nodes"),
    ("[" + ",".join([f'{{"id": "n{i}", "resources": {{}}}}' for i in range(100_001)]) + "]",
     "nodes.json: at most 100000 nodes, got 100001"),
])
def test_bad_nodes_as_json(text, message):
    with pytest.raises(BadInput) as error:
        parse_nodes_json(text, "nodes.json")
    assert str(error.value) == message


def test_generated_traces_are_deterministic_skewed_and_offer_the_load():
    totals = {"CPU": 128, "GPU": 32, "memory": 1024 * GIB}
    first = generate(5000, seed=3, totals=totals, users=20, load=1.0)
    assert first == generate(5000, seed=3, totals=totals, users=20, load=1.0)
    assert first != generate(5000, seed=4, totals=totals, users=20, load=1.0)
    per_user = {}
    for job in first:
        per_user[job.user] = per_user.get(job.user, 0) + 1
    counts = sorted(per_user.values(), reverse=True)
    assert counts[0] > 5 * counts[-1]  # user 1 submits with weight 1, user 20 with 1/20
    submits = [submit_s(job) for job in first]
    assert submits == sorted(submits)
    span = submits[-1]
    # The busiest resource is offered about `load` times what it can run over the span.
    offered = max(sum(job.pending.resources.get(name, 0) * job.run_s for job in first) / (total * span)
                  for name, total in totals.items())
    assert 0.95 < offered < 1.05
    half = generate(5000, seed=3, totals=totals, users=20, load=0.5)
    assert submit_s(half[-1]) == pytest.approx(2 * span, rel=0.01)


def submit_s(job: TraceJob) -> float:
    return (job.pending.submitted_at - EPOCH).total_seconds()


# --- Pipelines: ids, dependencies, arrays ------------------------------------------------------

PIPELINE = ("submit_time,user,resources,run_time,id,after,array\n"
            "0,ann,CPU:1,60,prep,,\n"
            "0,ann,CPU:2,30,sweep,prep,0-4:2%2\n"
            "5,ann,CPU:1,10,,\"sweep,prep:any\",\n"
            "5,bob,CPU:1,10,,sweep_2:fail,\n")


def test_a_pipeline_names_jobs_waits_for_them_and_makes_arrays():
    jobs = parse_csv(PIPELINE, "p.csv").jobs
    assert [job.id for job in jobs] == ["prep", "sweep_0", "sweep_2", "sweep_4", "5", "6"]
    assert [(job.array, job.throttle) for job in jobs] == [(None, None), *[("sweep", 2)] * 3, (None, None), (None, None)]
    assert jobs[1].pending == TraceJob.at("sweep_0", "ann", 0.0, {"CPU": 2.0}, 30.0).pending
    assert jobs[1].after == (Dependency("prep", When.OK),)
    # An array named waits for each of its tasks; a task may be named alone.
    assert jobs[4].after == (*(Dependency(f"sweep_{n}", When.OK) for n in (0, 2, 4)), Dependency("prep", When.ANY))
    assert jobs[5].after == (Dependency("sweep_2", When.FAIL),)


def test_without_a_header_the_pipeline_columns_come_after_the_others():
    [first, second] = parse_csv("0,a,CPU:1,5,,,,,,x\n0,a,CPU:1,5,,,,,,y,x:any,1-2\n", "t.csv").jobs[:2]
    assert (first.id, second.id, second.after, second.array) == ("x", "y_1", (Dependency("x", When.ANY),), "y")


@pytest.mark.parametrize("text, message", [
    ("submit_time,user,resources,run_time,after\n0,a,CPU:1,5,b\n",
     "t.csv line 2: after: 'b' is not the id of a job on a line above"),
    ("submit_time,user,resources,run_time,id,after\n0,a,CPU:1,5,x,x\n",
     "t.csv line 2: after: 'x' is not the id of a job on a line above"),
    ("submit_time,user,resources,run_time,id,after\n0,a,CPU:1,5,x,\n0,a,CPU:1,5,y,x:done\n",
     "t.csv line 3: after: 'x:done': 'done' is not one of ok, any, fail"),
    ("submit_time,user,resources,run_time,id\n0,a,CPU:1,5,x\n0,a,CPU:1,5,x\n", "t.csv line 3: id: 'x' names a job above already"),
    ("submit_time,user,resources,run_time,id,array\n0,a,CPU:1,5,x,1-3\n0,a,CPU:1,5,x_2,\n",
     "t.csv line 3: id: 'x_2' names a job above already"),
    ("submit_time,user,resources,run_time,array\n0,a,CPU:1,5,5-1\n",
     "t.csv line 2: array: '5-1': a range goes up (A-B with A at most B)"),
    ("submit_time,user,resources,run_time,array\n0,a,CPU:1,5,0-3%0\n",
     "t.csv line 2: array: '0' after '%' is not a throttle: give 1 to 10000 (at most that many tasks running at once)"),
    ("submit_time,user,resources,run_time,after,after\n", "t.csv line 1: column 'after' given twice"),
    ("submit_time,user,resources,run_time,depends\n",
     "t.csv line 1: unknown column 'depends': use submit_time,user,resources,run_time,priority,class,max_runtime,bundles,"
     "bundle_strategy,id,after,array"),
    ("submit_time,user,run_time,resources\n", "t.csv line 1: the first columns are submit_time,user,resources,run_time"),
    ("submit_time,user,resources,run_time,id\n0,a,CPU:1,5,x,y\n", "t.csv line 2: expected 4 to 5 fields "
     "(submit_time,user,resources,run_time,id), got 6"),
])
def test_bad_pipelines_name_the_line_and_field(text, message):
    with pytest.raises(BadInput) as error:
        parse_csv(text, "t.csv")
    assert str(error.value) == message
