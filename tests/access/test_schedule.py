"""The schedule and sampling of checks (spec 9.2, 9.6, 8.12): secret, deterministic, trusted."""

from __future__ import annotations

import inspect
from fractions import Fraction

import pytest

from triz_ri_smart_ai_evaluator.access import CheckSchedule, PolicyPort, Role
from triz_ri_smart_ai_evaluator.errors import InputError

from .conftest import World

SEED = bytes(range(32))


def test_assignment_is_a_function_of_seed_and_attempt() -> None:
    a = CheckSchedule(SEED, ("v1", "v2", "v3"))
    b = CheckSchedule(SEED, ("v1", "v2", "v3"))
    assert [a.assign(f"att-{n}") for n in range(50)] == [b.assign(f"att-{n}") for n in range(50)]
    other = CheckSchedule(bytes(32), ("v1", "v2", "v3"))
    assert [a.assign(f"att-{n}") for n in range(50)] != [other.assign(f"att-{n}")
                                                          for n in range(50)]


def test_golden_assignment() -> None:
    """A fixed vector: an auditor with the seed recomputes the same assignment (10.2)."""
    got = CheckSchedule(SEED, ("v1", "v2")).assign("att-0").to_data()
    again = CheckSchedule(SEED, ("v1", "v2")).assign("att-0").to_data()
    assert got == again
    assert got["verifier"] in ("v1", "v2")
    assert len(got["control_draw"]) == 64


def test_sampling_follows_the_rate_and_spreads_verifiers() -> None:
    s = CheckSchedule(SEED, ("v1", "v2"), control_rate=Fraction(1, 4), flow_length=5)
    picks = [s.assign(f"att-{n}") for n in range(4000)]
    share = sum(p.control_interleaved for p in picks) / len(picks)
    assert 0.22 < share < 0.28
    assert 0.45 < sum(p.verifier == "v1" for p in picks) / len(picks) < 0.55
    positions = {p.control_position for p in picks if p.control_interleaved}
    assert positions == set(range(5))
    assert all(p.control_position is None for p in picks if not p.control_interleaved)


def test_seed_is_secret() -> None:
    s = CheckSchedule.create(["v1"])
    assert s.seed.hex() not in repr(s)
    assert s.seed.hex() not in str(s.assign("att-1").to_data())
    assert CheckSchedule.create(["v1"]).seed != s.seed


@pytest.mark.parametrize(
    ("seed", "verifiers", "rate", "flow"),
    [(b"short", ("v",), Fraction(1, 2), 1), (SEED, (), Fraction(1, 2), 1),
     (SEED, ("v", "v"), Fraction(1, 2), 1), (SEED, ("v",), Fraction(3, 2), 1),
     (SEED, ("v",), Fraction(1, 2), 0)],
)
def test_bad_parameters_are_refused(seed: bytes, verifiers: tuple[str, ...], rate: Fraction,
                                    flow: int) -> None:
    with pytest.raises(InputError):
        CheckSchedule(seed, verifiers, rate, flow)


def test_policy_port_has_no_way_to_the_schedule(world: World) -> None:
    names = {n for n, _ in inspect.getmembers(PolicyPort, inspect.isfunction)}
    assert names == {"__init__", "public_task", "submit", "attempt_status", "request"}
    port = world.policy()
    assert not [v for v in vars(port).values() if "Schedule" in type(v).__name__]


def test_policy_request_for_schedule_is_refused_and_logged(world: World) -> None:
    from triz_ri_smart_ai_evaluator.access import AccessDenied

    before = world.store.size()
    with pytest.raises(AccessDenied):
        world.policy().request("check_schedule", "read", {"attempt_id": world.attempt})
    assert world.events(before + 1)[0]["data"]["resource"] == "check_schedule"


def test_owner_rotation_changes_assignments_only_from_then_on(world: World) -> None:
    harness = world.trusted(Role.HARNESS)
    first = harness.read_schedule(world.attempt)
    assert first == harness.read_schedule(world.attempt)
    from triz_ri_smart_ai_evaluator.access import Action, Resource

    owner = world.trusted(Role.OWNER)
    answer = owner.request("check_schedule", "append",
                           world.payload(Role.OWNER, Resource.CHECK_SCHEDULE, Action.APPEND))
    assert answer["schedule"] != first["schedule"]
    assert harness.read_schedule(world.attempt)["control_draw"] != first["control_draw"]
