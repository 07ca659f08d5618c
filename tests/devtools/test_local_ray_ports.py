"""The ports a local Ray cluster gives its nodes: no two components ever share one. The kernel gives
a closed port out again, and a head once failed to start because its metrics port was its GCS's."""

from job.devtools.local_ray import _free_ports


def test_no_port_is_given_twice_across_many_draws():
    taken: set[int] = set()
    drawn = [port for _ in range(500) for port in _free_ports(6, taken)]
    assert len(drawn) == 3000
    assert len(set(drawn)) == len(drawn)
    assert taken == set(drawn)


def test_a_port_already_taken_is_never_drawn():
    first = _free_ports(50, set())
    taken = set(first)
    again = [port for _ in range(500) for port in _free_ports(6, taken)]
    assert not set(first) & set(again)
