"""Highly correlated feedback and its reconciliation (spec 8.15, 9.15, 11.21).

8.15: "unauthenticated, highly correlated or anomalous evaluations are not included in the
signal until their provenance and connection with a real result have been verified".
"""

from __future__ import annotations

import pytest

from tests.provenance.conftest import ATTEMPT, INDEPENDENT_TEXT, World
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.provenance import Reason, Status

REVIEW = (
    "Checked the invoice run for account 4471 against the bank feed; every line item is "
    "present, the VAT lines agree with the regional table and the closing balance is right."
)


def test_near_duplicate_confirmations_from_several_sources_are_all_held(world: World) -> None:
    """8.15: three sources sending the same review (lightly edited) are copies, not three
    confirmations: all are quarantined as correlated, the first one retroactively."""
    for name in ("site-a", "site-b", "site-c"):
        world.source(name)
    first = world.submit("site-a", REVIEW)
    assert first.status is Status.ACCEPTED  # nothing to compare with yet
    second = world.submit("site-b", REVIEW.replace("Checked", "We checked"))
    third = world.submit("site-c", REVIEW.upper())
    assert second.reasons == (Reason.CORRELATED,)
    assert third.reasons == (Reason.CORRELATED,)
    assert set(third.decision.correlated_with) == {first.receipt, second.receipt}
    held_first = world.register.state.entry(first.receipt)
    assert held_first is not None
    assert held_first.status is Status.QUARANTINED
    assert held_first.reasons == (Reason.CORRELATED,)
    assert world.register.counts_as_independent(ATTEMPT) == ()


def test_distinct_confirmations_from_several_sources_all_count(world: World) -> None:
    """The copy check must not hold genuinely independent texts about the same result."""
    world.source("site-a")
    world.source("site-b")
    world.submit("site-a", REVIEW)
    world.submit("site-b", INDEPENDENT_TEXT)
    assert len(world.register.counts_as_independent(ATTEMPT)) == 2


def test_agreeing_structured_confirmations_are_not_copies(world: World) -> None:
    """Independent components reporting the same value in the same schema agree exactly;
    that is agreement, not correlation (the copy check is for free text)."""
    value = {"account": "4471", "balance": "1234.56", "currency": "EUR",
             "checked_by": "automated reconciliation", "period": "2025-02", "status": "match"}
    for name in ("bank-feed", "erp-export", "auditor"):
        world.source(name)
        assert world.submit(name, value).status is Status.ACCEPTED
    assert len(world.register.counts_as_independent(ATTEMPT)) == 3


def test_structured_confirmation_is_not_compared_with_free_text(world: World) -> None:
    """The copy check compares free text with free text only, in either order."""
    value = {"account": "4471", "balance": "1234.56", "currency": "EUR",
             "checked_by": "automated reconciliation", "period": "2025-02", "status": "match"}
    words = "account 4471 balance 1234 56 checked by automated reconciliation currency eur "
    world.source("site-a")
    world.source("erp-export")
    assert world.submit("site-a", words + "period 2025 02 status match").status is Status.ACCEPTED
    assert world.submit("erp-export", value).status is Status.ACCEPTED


def test_same_source_repeating_itself_is_not_correlation(world: World) -> None:
    world.source("site-a")
    world.submit("site-a", REVIEW)
    again = world.submit("site-a", REVIEW + " Rechecked.")
    assert Reason.CORRELATED not in again.reasons


def test_reconciliation_releases_a_correlated_confirmation_with_evidence(world: World) -> None:
    """9.15 "reconciliation results": the verification is recorded (evidence digest, note,
    who) and the released confirmation counts."""
    world.source("site-a")
    world.source("site-b")
    first = world.submit("site-a", REVIEW)
    world.submit("site-b", REVIEW)
    with pytest.raises(InputError, match="evidence"):
        world.register.reconcile(first.receipt, outcome="released", note="checked")
    released = world.register.reconcile(first.receipt, outcome=Status.RELEASED,
                                        note="site-a ran its own check; site-b copied it",
                                        evidence=b"call notes 2025-03-02", by="auditor-jane")
    assert released.status is Status.RELEASED
    assert released.reconciliation is not None
    assert released.reconciliation.actor == "auditor-jane"
    assert [e.receipt for e in world.register.counts_as_independent(ATTEMPT)] == [first.receipt]
    last = world.all_events()[-1]
    assert last.kind == "quarantine.changed"
    assert last.data["status"] == "released"
    assert last.fields["actor"] == "auditor-jane"


def test_rejected_confirmation_stays_out_and_cannot_be_reopened(world: World) -> None:
    world.source("site-a")
    world.source("site-b")
    world.submit("site-a", REVIEW)
    second = world.submit("site-b", REVIEW)
    world.register.reconcile(second.receipt, outcome="rejected", note="copied")
    with pytest.raises(InputError, match="no confirmation in quarantine"):
        world.register.reconcile(second.receipt, outcome="released", note="x", evidence=b"x")
    assert all(e.receipt != second.receipt
               for e in world.register.counts_as_independent(ATTEMPT))


@pytest.mark.parametrize("kind", ["unsigned", "model_output"])
def test_reconciliation_cannot_release_unauthenticated_or_self_sourced_feedback(
    world: World, kind: str
) -> None:
    """8.15/9.16: a person cannot vouch an unsigned statement or the model's own output into
    the signal; it must be resubmitted signed, or it never counts."""
    from dataclasses import replace

    from triz_ri_smart_ai_evaluator.provenance import Origin

    if kind == "unsigned":
        world.source("site-a")
        entry = world.register.submit_confirmation(
            replace(world.signed("site-a", REVIEW), signature=None))
        expected = "unsigned"
    else:
        world.source("site-a", origin=Origin.EVALUATED_MODEL_OUTPUT)
        entry = world.submit("site-a", REVIEW)
        expected = "not_independent_origin"
    with pytest.raises(InputError, match=expected):
        world.register.reconcile(entry.receipt, outcome="released", note="trust me",
                                 evidence=b"x")


def test_reconcile_rejects_malformed_requests(world: World) -> None:
    world.source("site-a")
    accepted = world.submit("site-a", REVIEW)
    with pytest.raises(InputError, match="no confirmation in quarantine"):
        world.register.reconcile(accepted.receipt, outcome="rejected", note="x")
    with pytest.raises(InputError, match="no confirmation in quarantine"):
        world.register.reconcile("nope", outcome="rejected", note="x")
    with pytest.raises(InputError, match="outcome 'maybe'"):
        world.register.reconcile(accepted.receipt, outcome="maybe", note="x")
