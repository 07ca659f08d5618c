from job.cli.jobs import _observed

GREEDY = {"declared": {"CPU": 0.5}, "used": {"CPU": 3.5}, "charged": {"CPU": 3.5}, "nodes": {"a": {"CPU": 1.5}, "b": {"CPU": 2}},
          "placement_groups": 0, "actors": 3, "tasks": 0, "over_since": "2026-12-01T17:10:23.631652+00:00"}


def test_show_gives_declared_and_used_side_by_side_and_since_when_over_as_its_other_times():
    assert _observed(GREEDY) == {
        "declared": "CPU=0.5", "used": "CPU=3.5 (CPU=1.5 on node a; CPU=2 on node b)", "charged": "CPU=3.5",
        "in ray": "0 placement groups, 3 actors, 0 tasks", "over since": "2026-12-01T17:10:23.631652Z"}
    assert "over since" not in _observed({**GREEDY, "over_since": None})
