"""Echo detection: a policy output repeated through other sources never confirms it.

Spec 11.21 ("a model output repeated through other sources is not accepted as independent
confirmation"), 8.14 (self-reinforcing echo), 9.16.
"""

from __future__ import annotations

import pytest

from tests.provenance.conftest import ATTEMPT, INDEPENDENT_TEXT, POLICY_OUTPUT, World
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.provenance import Reason, Status


def _change_words(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new, 1)
    return text


ECHO_VARIANTS = {
    "verbatim": POLICY_OUTPUT,
    "case_and_whitespace": "  " + POLICY_OUTPUT.upper().replace(" ", " \n\t ") + "  ",
    "punctuation_and_zero_width": POLICY_OUTPUT.replace(",", " ;").replace("VAT", "V\u200bAT"),
    "three_words_changed": _change_words(
        POLICY_OUTPUT, {"monthly": "weekly", "regional": "national", "ledger": "bank"}
    ),
    "sentences_reordered": "the result for account 4471 is 1234.56 EUR and it matches the "
    "ledger balance. The function computes the monthly invoice total by summing all line "
    "items, applying the regional VAT rate of 20 percent, and rounding half up to two "
    "decimal places.",
}


@pytest.mark.parametrize("variant", sorted(ECHO_VARIANTS))
def test_echoed_policy_output_is_quarantined_and_not_counted(world: World, variant: str) -> None:
    """11.21/8.14: the policy's output, verbatim or lightly disguised, submitted by a signed,
    independent-looking source is quarantined as an echo and not counted."""
    world.source("bank-feed")
    entry = world.submit("bank-feed", ECHO_VARIANTS[variant])
    assert entry.status is Status.QUARANTINED
    assert Reason.ECHO in entry.reasons
    assert entry.decision.authenticated  # the signature was fine: only the content is an echo
    assert entry.decision.echo_of[0].attempt == ATTEMPT
    assert world.register.counts_as_independent(ATTEMPT) == ()
    kinds = world.kinds()
    assert kinds[-3:] == ["confirmation.received", "quarantine.changed", "echo.detected"]


def test_same_echo_from_five_signed_sources_counts_zero_times(world: World) -> None:
    """8.14/11.21: repetition by many sources does not turn an echo into confirmation."""
    for n in range(5):
        world.source(f"mirror-{n}")
        entry = world.submit(f"mirror-{n}", POLICY_OUTPUT + f" Mirrored by site {n}.")
        assert entry.status is Status.QUARANTINED
        assert Reason.ECHO in entry.reasons
        assert entry.decision.authenticated
    assert world.register.counts_as_independent(ATTEMPT) == ()
    assert world.kinds().count("echo.detected") == 5
    # The later copies are also copies of each other: correlated, not five votes.
    last = world.register.state.entries(ATTEMPT)[-1]
    assert Reason.CORRELATED in last.reasons
    assert len(last.decision.correlated_with) == 4


def test_echo_of_another_attempts_output_is_still_an_echo(world: World) -> None:
    """8.14: the echo is about the policy's output anywhere, not just in this attempt."""
    world.start_attempt("task-7/attempt-2")
    world.source("bank-feed")
    entry = world.submit("bank-feed", POLICY_OUTPUT, attempt="task-7/attempt-2")
    assert Reason.ECHO in entry.reasons
    assert entry.decision.echo_of[0].attempt == ATTEMPT


def test_independent_confirmation_on_the_same_subject_is_not_an_echo(world: World) -> None:
    """The threshold leaves room for genuine confirmations that share the subject's words."""
    world.source("bank-feed")
    entry = world.submit("bank-feed", INDEPENDENT_TEXT)
    assert entry.status is Status.ACCEPTED
    assert entry.decision.echo_of == ()


def test_confirmation_accepted_before_the_output_was_recorded_is_quarantined_later(
    world: World,
) -> None:
    """8.14: recording a policy output re-checks accepted confirmations; one that turns out to
    repeat it (in either direction the two are not independent) stops counting."""
    world.source("bank-feed")
    late_output = INDEPENDENT_TEXT + " Verified."
    entry = world.submit("bank-feed", INDEPENDENT_TEXT)
    assert entry.status is Status.ACCEPTED
    assert len(world.register.counts_as_independent(ATTEMPT)) == 1
    world.register.record_policy_output(ATTEMPT, late_output)
    now = world.register.state.entry(entry.receipt)
    assert now is not None
    assert now.status is Status.QUARANTINED
    assert now.reasons == (Reason.ECHO,)
    assert world.register.counts_as_independent(ATTEMPT) == ()
    assert world.kinds()[-2:] == ["quarantine.changed", "echo.detected"]


def test_policy_output_is_stored_as_evidence_and_only_fingerprints_in_the_event(
    world: World,
) -> None:
    """The ledger event holds digests, not the text; the text is retrievable as evidence."""
    event = next(ev for ev in world.all_events() if ev.kind == "policy.output")
    assert b"invoice" not in event.body
    digest = event.data["output"]
    assert world.store.get_evidence(digest).decode() == POLICY_OUTPUT
    assert set(event.data["fingerprint"]) == {"method", "sha256", "tokens", "minhash"}


def test_an_echo_is_released_only_by_a_reconciliation_with_evidence(world: World) -> None:
    """8.15: held until provenance is verified - the release needs the verification on record;
    without it the echo stays out of the count."""
    world.source("bank-feed")
    entry = world.submit("bank-feed", POLICY_OUTPUT)
    with pytest.raises(InputError, match="evidence"):
        world.register.reconcile(entry.receipt, outcome="released", note="looks fine")
    assert world.register.counts_as_independent(ATTEMPT) == ()
