"""Independence: what may confirm, and what never can (spec 9.3, 9.16, 10.8, 8.15, 11.21)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.provenance.conftest import ATTEMPT, INDEPENDENT_TEXT, T0, World
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.provenance import Origin, ProvenanceRules, Reason, Status


@pytest.mark.parametrize(
    ("origin", "synthetic", "reasons"),
    [
        (Origin.EVALUATED_MODEL_OUTPUT, False, (Reason.NOT_INDEPENDENT_ORIGIN,)),
        (Origin.SYNTHETIC, True, (Reason.NOT_INDEPENDENT_ORIGIN, Reason.SYNTHETIC_CONTENT)),
        (Origin.OTHER_MODEL_OUTPUT, False, (Reason.NOT_INDEPENDENT_ORIGIN,)),
        (Origin.HUMAN_LABELLING, True, (Reason.SYNTHETIC_CONTENT,)),
    ],
)
def test_model_output_and_synthetic_sources_never_confirm(
    world: World, origin: Origin, synthetic: bool, reasons: tuple[Reason, ...]
) -> None:
    """9.16: a chain whose ultimate source is the model's own claim never confirms; synthetic
    data and model outputs are not mixed with independent data without an explicit rule."""
    world.source("src", origin=origin, synthetic=synthetic)
    entry = world.submit("src", INDEPENDENT_TEXT)
    assert entry.reasons == reasons
    assert entry.decision.authenticated
    assert world.register.counts_as_independent(ATTEMPT) == ()


def test_human_labelling_confirms(world: World) -> None:
    """10.8: human labelling is an origin that may confirm by default."""
    world.source("labeller-3", origin=Origin.HUMAN_LABELLING)
    assert world.submit("labeller-3", INDEPENDENT_TEXT).status is Status.ACCEPTED


def test_other_model_output_confirms_only_under_an_explicit_rule(make_world: object) -> None:
    """9.16 "without an explicit rule": the rule admitting another model is stated and
    recorded with every decision it made."""
    rules = ProvenanceRules(admitted_origins=frozenset(
        {Origin.INDEPENDENT_OPERATIONAL, Origin.OTHER_MODEL_OUTPUT}))
    world = make_world(rules)  # type: ignore[operator]
    world.start_attempt()
    world.source("judge-model", origin=Origin.OTHER_MODEL_OUTPUT)
    entry = world.submit("judge-model", INDEPENDENT_TEXT)
    assert entry.status is Status.ACCEPTED
    event = world.all_events()[-1]
    assert event.data["rules"]["admitted_origins"] == ["independent_operational",
                                                       "other_model_output"]


@pytest.mark.parametrize("origin", [Origin.EVALUATED_MODEL_OUTPUT, Origin.SYNTHETIC])
def test_no_rule_can_admit_the_models_own_output(origin: Origin) -> None:
    """9.16: not even configuration can let the model confirm itself."""
    with pytest.raises(InputError, match=r"9\.16"):
        ProvenanceRules(admitted_origins=frozenset({origin}))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"near_duplicate": "0.3"}, "between 0.5 and 1"), ({"near_duplicate": "x"}, "decimal"),
     ({"min_tokens": 0}, "at least 1"), ({"clock_skew_seconds": -1}, "non-negative"),
     ({"admitted_origins": frozenset({"martian"})}, "admitted origin 'martian'")],
)
def test_malformed_rules_raise_input_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        ProvenanceRules(**kwargs)  # type: ignore[arg-type]


def test_confirmation_of_an_attempt_the_ledger_never_saw_is_quarantined(world: World) -> None:
    """9.3: every record is linked to a specific attempt that exists."""
    world.source("bank-feed")
    entry = world.submit("bank-feed", INDEPENDENT_TEXT, attempt="task-7/attempt-404")
    assert entry.reasons == (Reason.UNKNOWN_ATTEMPT,)
    # A quarantined confirmation does not make its attempt known for the next one.
    again = world.submit("bank-feed", INDEPENDENT_TEXT + " Again.", attempt="task-7/attempt-404")
    assert Reason.UNKNOWN_ATTEMPT in again.reasons


@pytest.mark.parametrize(
    ("issued_at", "source_created"),
    [(T0 + timedelta(days=3), T0 - timedelta(days=1)),  # from the future (clock: T0 + 1 h)
     (T0 - timedelta(hours=1), T0 - timedelta(days=1)),  # before the attempt began
     (T0 + timedelta(minutes=5), T0 + timedelta(minutes=30))],  # before the source existed
    ids=["future", "before-attempt", "before-source"],
)
def test_anomalous_issue_time_is_quarantined(
    world: World, issued_at: datetime, source_created: datetime
) -> None:
    """8.15: anomalous feedback is held until reconciled."""
    world.source("bank-feed", created_at=source_created)
    entry = world.submit("bank-feed", INDEPENDENT_TEXT, issued_at=issued_at)
    assert entry.reasons == (Reason.ANOMALOUS_TIME,)
    assert world.register.counts_as_independent(ATTEMPT) == ()


def test_issue_time_within_the_clock_skew_is_not_anomalous(world: World) -> None:
    world.source("bank-feed")
    entry = world.submit("bank-feed", INDEPENDENT_TEXT, issued_at=T0 - timedelta(seconds=299))
    assert entry.status is Status.ACCEPTED


def test_a_source_counts_once_per_attempt(world: World) -> None:
    """8.14: more statements from the same source are not more independence."""
    world.source("bank-feed")
    world.source("labeller", origin=Origin.HUMAN_LABELLING)
    first = world.submit("bank-feed", INDEPENDENT_TEXT)
    second = world.submit("bank-feed", {"balance": "1234.56", "currency": "EUR"})
    third = world.submit("labeller", {"verdict": "correct"})
    assert second.status is Status.ACCEPTED
    counted = world.register.counts_as_independent(ATTEMPT)
    assert [e.receipt for e in counted] == [first.receipt, third.receipt]
