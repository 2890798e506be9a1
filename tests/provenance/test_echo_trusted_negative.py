"""Echo collision: the policy writes a trusted negative first (issue 10, defect class 9).

Spec 8.14 protects against the policy's own words coming back as *confirmation*; 9.16 forbids an
*increasing* signal from a chain that ends in the policy's own claim.  Neither lets the policy
discard a genuine adverse report by writing its wording first: if the issue tracker's signed
recurrence report were quarantined as an echo, the escrow would be released as if nothing had
recurred (9.17, 10.6) - the evaluator would fail open.  So an authenticated report from an
admissible source that is held back only because its content collides with a policy output is
recorded as an ``echo_collision`` (decision, ``echo.detected`` event, escrow event) and may settle
the escrow only in the direction that lowers the policy's signal (11.20, 11.21).  See
docs/adr/0006-echo-collision-trusted-negatives.md.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.ledger._attempt_cli import with_stored_evidence
from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.errors import IntegrityError
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.provenance import (
    CONTENT_REASONS,
    ComponentKey,
    Confirmation,
    Decision,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    Reason,
    SourceRecord,
    Status,
    sign_confirmation,
)
from triz_ri_smart_ai_evaluator.rules import pin

from ..signal.factories import DEFECT, inputs_for, task_class

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)  # defect_fix rules v2 in force
ATTEMPT = "defect-1"
TRACKER = "issue_tracker"  # the class's declared control source (defect_fix_delayed_confirmation)
TRACKER_SEED = b"t" * 32
ISSUED = T0 + timedelta(days=10)
SETTLED = T0 + timedelta(days=15)

CLAIM = (
    "The defect is fixed: the connection pool no longer leaks, recurrence is impossible and "
    "the issue can be closed as verified by the engineering team after review today."
)
RECURRENCE = (
    "Verified recurrence of defect D-17: the connection pool leak reappeared in production "
    "on node api-3 at 02:14 UTC, reproducing trace attached to ticket OPS-4411 by the on-call "
    "operator."
)
NO_RECURRENCE = (
    "No recurrence of defect D-17 was reported during the fourteen day observation period; the "
    "connection pool stayed healthy on every production node and the ticket can be closed."
)
RECURRENCE_JSON = {"defect": "D-17", "recurrence_reports": 1, "trace": "OPS-4411"}


def _words_changed(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new, 1)
    return text


#: How the policy writes the report's wording into its own output before the report arrives.
PRE_WRITTEN = {
    "verbatim": RECURRENCE,
    "normalised_differently": "  " + RECURRENCE.upper().replace(" ", " \n ").replace(":", " ;")
    + " ...",
    "paraphrased": _words_changed(RECURRENCE, {"reappeared": "returned", "node": "host"}),
    "sentences_reordered": "Reproducing trace attached to ticket OPS-4411 by the on-call "
    "operator. Verified recurrence of defect D-17: the connection pool leak reappeared in "
    "production on node api-3 at 02:14 UTC.",
}


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@dataclass
class Defect:
    """A delayed-class attempt holding half its signal in escrow, and a register on its ledger."""

    store: SqliteStore
    register: ProvenanceRegister
    tracker: ComponentKey

    def signed(self, content: Any, *, key: ComponentKey | None = None,
               source: str = TRACKER) -> Confirmation:
        return sign_confirmation(key or self.tracker, source=source, attempt=ATTEMPT,
                                 content=content, issued_at=ISSUED)

    def settle(self, content: Any, value: str) -> Any:
        return attempts.settle(self.store, ATTEMPT, late=late(content, value), at=SETTLED,
                               provenance=self.register)

    def escrow(self) -> list[Any]:
        return [e for e in self.store.attempt_events(ATTEMPT) if e.kind.startswith("escrow.")]

    def kinds(self) -> list[str]:
        return [e.kind for e in self.store.attempt_events(ATTEMPT)]


def digest_of(content: Any) -> str:
    """The evidence digest of a confirmation's content: SHA-256 of its canonical JSON (a text
    is stored as a JSON string), as the register stores it."""
    return hashlib.sha256(canonical_json(content)).hexdigest()


def late(content: Any, value: str) -> dict[str, Any]:
    return {"recurrence_free": {"value": value, "source": TRACKER,
                                "evidence": [digest_of(content)]}}


def build(path: Path, *, register_tracker: bool = True) -> Defect:
    store = SqliteStore.open(path)
    pinned = pin(task_class(DEFECT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id=ATTEMPT, task_version="1", started_at=T0,
                      deadline=T0 + timedelta(days=14))
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    inputs = with_stored_evidence(store, ATTEMPT, inputs_for(DEFECT, values))
    attempts.evaluate(store, pinned, inputs, attempt_id=ATTEMPT, at=T0)
    register = ProvenanceRegister(store, actor="provenance-register",
                                  clock=Clock(T0 + timedelta(days=14)))
    tracker = ComponentKey.from_private_bytes(TRACKER_SEED)
    if register_tracker:
        register.register_source(SourceRecord(
            id=TRACKER, party="issue tracker webhook", created_at=T0 - timedelta(days=30),
            origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
            independence="operators file recurrences with a reproducing trace; the policy "
                         "can read the public part only",
            policy_access=PolicyAccess.READ, authentication=tracker.authentication))
    register.record_policy_output(ATTEMPT, CLAIM)
    return Defect(store, register, tracker)


@pytest.fixture
def defect(tmp_path: Path) -> Iterator[Defect]:
    d = build(tmp_path / "ledger.db")
    yield d
    d.store.close()


def _preliminary(d: Defect) -> Decimal:
    award = next(e for e in d.store.attempt_events(ATTEMPT) if e.kind == "award.decision")
    return Decimal(award.data["value"])


# -- the regression --------------------------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(PRE_WRITTEN))
def test_policy_prewriting_the_recurrence_report_does_not_discard_the_trackers_signed_report(
    defect: Defect, variant: str,
) -> None:
    """The attack: the policy writes the expected wording of the negative report into its own
    output; the tracker's genuine, correctly signed recurrence report then matches it.  It is
    still counted against the policy (escrow adjusted down, recurrence_free = 0), and the
    collision is recorded for the auditor (8.14 applies to confirmation only, 9.16)."""
    defect.register.record_policy_output(ATTEMPT, PRE_WRITTEN[variant])
    entry = defect.register.submit_confirmation(defect.signed(RECURRENCE))

    # Held back as confirmation (8.14), yet recognised as an authenticated collision.
    assert Reason.ECHO in entry.reasons
    assert entry.status is Status.QUARANTINED
    assert entry.decision.authenticated
    assert entry.decision.echo_collision
    assert entry.echo_collision
    assert entry.to_data()["decision"]["echo_collision"] is True
    assert defect.register.counts_as_independent(ATTEMPT) == ()
    assert [e.receipt for e in defect.register.echo_collisions(ATTEMPT)] == [entry.receipt]
    echo_event = next(e for e in reversed(defect.store.attempt_events(ATTEMPT))
                      if e.kind == "echo.detected")
    assert echo_event.data["echo_collision"] is True

    before = _preliminary(defect)
    settled = defect.settle(RECURRENCE, "0")
    assert settled.kind.value == "adjusted"
    assert settled.final < before
    assert settled.payable_at_settlement <= 0  # the held share is not paid out
    escrow = defect.escrow()
    assert [e.kind for e in escrow] == ["escrow.held", "escrow.adjusted"]
    collisions = escrow[-1].data["echo_collision"]
    assert collisions == [{"indicator": "recurrence_free", "receipt": entry.receipt,
                           "confirmation": entry.id, "source": TRACKER,
                           "reasons": ["echo"]}]
    # Visible to the auditor in the spec 10.1 record as well.
    record = attempts.attempt_record(defect.store.attempt_events(ATTEMPT))
    assert record["final_values"]["recurrence_free"] == "0"
    assert record["escrow"][-1]["echo_collision"] == collisions


def test_a_structured_report_whose_json_the_policy_wrote_first_is_still_counted(
    defect: Defect,
) -> None:
    """Same attack with a structured report: the policy outputs the report's canonical JSON."""
    defect.register.record_policy_output(ATTEMPT, canonical_json(RECURRENCE_JSON).decode())
    entry = defect.register.submit_confirmation(defect.signed(RECURRENCE_JSON))
    assert entry.decision.echo_of
    assert entry.echo_collision
    settled = defect.settle(RECURRENCE_JSON, "0")
    assert settled.kind.value == "adjusted"
    assert defect.escrow()[-1].data["echo_collision"][0]["receipt"] == entry.receipt


def test_a_report_accepted_first_and_echoed_by_the_policy_afterwards_still_counts(
    defect: Defect,
) -> None:
    """The other order: the tracker's report is accepted, then the policy (which can read the
    tracker's public part) repeats it; recording that output quarantines the report as an echo
    (8.14), which must not turn it into nothing."""
    entry = defect.register.submit_confirmation(defect.signed(RECURRENCE))
    assert entry.counted
    defect.register.record_policy_output(ATTEMPT, RECURRENCE.lower())
    now = defect.register.state.entry(entry.receipt)
    assert now is not None
    assert now.reasons == (Reason.ECHO,)
    assert now.echo_collision
    echo_event = next(e for e in reversed(defect.store.attempt_events(ATTEMPT))
                      if e.kind == "echo.detected")
    assert echo_event.data["echo_collision"] is True
    assert defect.settle(RECURRENCE, "0").kind.value == "adjusted"


def test_a_report_copied_afterwards_by_a_source_the_policy_writes_to_still_counts(
    defect: Defect,
) -> None:
    """8.15 copies discredit each other as *confirmation*; a policy that can write to another
    signed source must not void the tracker's report that way either.  The copy itself never
    counts: the policy's write access is a provenance reason, not a content reason."""
    mirror = ComponentKey.from_private_bytes(b"m" * 32)
    defect.register.register_source(SourceRecord(
        id="forum-mirror", party="community forum relay", created_at=T0 - timedelta(days=30),
        origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
        independence="relays public posts; the policy can post there",
        policy_access=PolicyAccess.WRITE, authentication=mirror.authentication))
    entry = defect.register.submit_confirmation(defect.signed(RECURRENCE))
    assert entry.counted
    copy = defect.register.submit_confirmation(
        defect.signed(RECURRENCE, key=mirror, source="forum-mirror"))
    assert Reason.POLICY_CAN_WRITE in copy.reasons
    assert not copy.echo_collision
    now = defect.register.state.entry(entry.receipt)
    assert now is not None
    assert now.reasons == (Reason.CORRELATED,)
    assert now.echo_collision
    notice = next(e for e in reversed(defect.store.attempt_events(ATTEMPT))
                  if e.kind == "quarantine.changed" and e.data["receipt"] == entry.receipt)
    assert notice.data["echo_collision"] is True
    assert [e.receipt for e in defect.register.echo_collisions(ATTEMPT)] == [entry.receipt]
    assert defect.settle(RECURRENCE, "0").kind.value == "adjusted"


# -- what stays out --------------------------------------------------------------------------
def _unsigned(d: Defect) -> Confirmation:
    return Confirmation(TRACKER, ATTEMPT, RECURRENCE, ISSUED)


def _wrong_key(d: Defect) -> Confirmation:
    return d.signed(RECURRENCE, key=ComponentKey.from_private_bytes(b"x" * 32))


def _tampered(d: Defect) -> Confirmation:
    good = d.signed(RECURRENCE)
    return Confirmation(TRACKER, ATTEMPT, RECURRENCE + " Closed.", ISSUED, good.signature)


@pytest.mark.parametrize("forge", [_unsigned, _wrong_key, _tampered],
                         ids=["unsigned", "wrongly_signed", "tampered"])
def test_an_unauthenticated_echoing_report_is_still_quarantined(defect: Defect, forge) -> None:
    """8.15: only authentication makes a collision admissible; a forged or unsigned report is
    quarantined and settles nothing, in either direction."""
    defect.register.record_policy_output(ATTEMPT, RECURRENCE)
    entry = defect.register.submit_confirmation(forge(defect))
    assert entry.status is Status.QUARANTINED
    assert not entry.decision.authenticated
    assert not entry.echo_collision
    assert defect.register.echo_collisions(ATTEMPT) == ()
    before = defect.store.size()
    with pytest.raises(IntegrityError, match="provenance register"):
        defect.settle(forge(defect).content, "0")
    assert defect.store.size() == before
    assert [e.kind for e in defect.escrow()] == ["escrow.held"]


def test_an_echoing_report_from_an_unregistered_source_is_still_quarantined(
    tmp_path: Path,
) -> None:
    d = build(tmp_path / "l.db", register_tracker=False)
    try:
        d.register.record_policy_output(ATTEMPT, RECURRENCE)
        entry = d.register.submit_confirmation(d.signed(RECURRENCE))
        assert Reason.UNKNOWN_SOURCE in entry.reasons
        assert not entry.echo_collision
        with pytest.raises(IntegrityError, match="provenance register"):
            d.settle(RECURRENCE, "0")
        assert [e.kind for e in d.escrow()] == ["escrow.held"]
    finally:
        d.store.close()


def test_a_policy_echoed_positive_confirmation_is_still_quarantined(defect: Defect) -> None:
    """8.14 as before: the policy's "no recurrence" wording, coming back signed by the tracker,
    never releases the held share - a collision may only lower the signal."""
    defect.register.record_policy_output(ATTEMPT, NO_RECURRENCE)
    entry = defect.register.submit_confirmation(defect.signed(NO_RECURRENCE.upper()))
    assert entry.status is Status.QUARANTINED
    assert entry.echo_collision  # recorded as a collision...
    before = defect.store.size()
    with pytest.raises(IntegrityError, match="provenance register"):
        defect.settle(NO_RECURRENCE.upper(), "1")  # ...but it cannot raise the signal
    assert defect.store.size() == before
    assert [e.kind for e in defect.escrow()] == ["escrow.held"]


def test_a_collision_rejected_by_reconciliation_settles_nothing(defect: Defect) -> None:
    """A person who reviewed the collision and rejected it has the last word (8.15)."""
    defect.register.record_policy_output(ATTEMPT, RECURRENCE)
    entry = defect.register.submit_confirmation(defect.signed(RECURRENCE))
    defect.register.reconcile(entry.receipt, outcome="rejected", note="not a real recurrence")
    assert defect.register.echo_collisions(ATTEMPT) == ()
    with pytest.raises(IntegrityError, match="provenance register"):
        defect.settle(RECURRENCE, "0")


def test_a_collision_from_a_source_in_quarantine_settles_nothing(defect: Defect) -> None:
    """1.22: while the source itself is held, nothing it said counts, in either direction."""
    from dataclasses import replace

    defect.register.record_policy_output(ATTEMPT, RECURRENCE)
    defect.register.submit_confirmation(defect.signed(RECURRENCE))
    source = defect.register.state.current_source(TRACKER)
    assert source is not None
    defect.register.amend_source(replace(source, quarantined=True,
                                         quarantine_reason="key may have leaked"),
                                 change="suspected key leak")
    assert defect.register.echo_collisions(ATTEMPT) == ()
    with pytest.raises(IntegrityError, match="provenance register"):
        defect.settle(RECURRENCE, "0")


def test_the_collision_survives_a_rebuild_and_a_forged_flag_is_refused(defect: Defect) -> None:
    """The flag is derived from the recorded reasons and authentication; the ledger alone
    rebuilds it, and a recorded flag that contradicts them does not hold (1.17)."""
    defect.register.record_policy_output(ATTEMPT, RECURRENCE)
    entry = defect.register.submit_confirmation(defect.signed(RECURRENCE))
    rebuilt = ProvenanceRegister(defect.store, actor="auditor")
    assert [e.receipt for e in rebuilt.echo_collisions(ATTEMPT)] == [entry.receipt]
    data = entry.decision.to_data()
    assert Decision.from_data(data, IntegrityError) == entry.decision
    legacy = {k: v for k, v in data.items() if k != "echo_collision"}  # before this field
    assert Decision.from_data(legacy, IntegrityError) == entry.decision
    with pytest.raises(IntegrityError, match="echo_collision"):
        Decision.from_data({**data, "echo_collision": False}, IntegrityError)


def test_content_reasons_are_only_the_similarity_reasons() -> None:
    """Only reasons about the *content's* independence are lifted for adverse use; every
    reason about who said it (signature, source, origin, time, attempt, repeat) still holds."""
    assert frozenset({Reason.ECHO, Reason.CORRELATED}) == CONTENT_REASONS


# -- the property ----------------------------------------------------------------------------
VOCABULARY = [
    "defect", "D-17", "recurrence", "verified", "connection", "pool", "leak", "production",
    "node", "api-3", "trace", "ticket", "OPS-4411", "operator", "fixed", "closed", "no",
    "healthy", "observation", "period", "reported", "engineering", "team", "the", "a", "of",
    "on", "in", "and", "with", "by", "was", "is",
]
texts = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=40).map(" ".join)


@st.composite
def scenario(draw: st.DrawFn) -> dict[str, Any]:
    report_text = draw(texts)
    structured = draw(st.booleans())
    report: Any = {"report": report_text, "n": draw(st.integers(0, 3))} if structured \
        else report_text
    as_text = canonical_json(report).decode() if structured else report_text
    how = draw(st.sampled_from(["unrelated", "verbatim", "upper", "padded", "prefix"]))
    outputs = draw(st.lists(texts, max_size=2))
    if how == "verbatim":
        outputs.append(as_text)
    elif how == "upper":
        outputs.append(as_text.upper().replace(" ", "\t"))
    elif how == "padded":
        outputs.append(as_text + " " + draw(texts))
    elif how == "prefix":
        outputs.append(draw(texts) + ". " + as_text)
    return {"report": report, "outputs": outputs, "recurred": draw(st.booleans())}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Decimal]:
    """A ready ledger to copy per example, and the final signal with no control event."""
    root = tmp_path_factory.mktemp("echo-property")
    d = build(root / "template.db")
    d.store.close()
    shutil.copyfile(root / "template.db", root / "deadline.db")
    store = SqliteStore.open(root / "deadline.db")
    without = attempts.settle(store, ATTEMPT, late=None, at=SETTLED).final
    store.close()
    return root / "template.db", without


@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=scenario())
def test_a_signed_control_source_report_is_never_discarded_because_of_the_policys_output(
    template: tuple[Path, Decimal], case: dict[str, Any],
) -> None:
    """Over random policy outputs and reports: a valid signed report from the declared control
    source is never discarded because of what the policy wrote (it counts, or it is an
    authenticated collision), a recurrence always settles and never above the settlement with
    no recurrence, and an echoed favourable report never settles."""
    path, without = template
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "l.db"
        shutil.copyfile(path, copy)
        store = SqliteStore.open(copy)
        try:
            register = ProvenanceRegister(store, actor="provenance-register",
                                          clock=Clock(T0 + timedelta(days=12)))
            d = Defect(store, register, ComponentKey.from_private_bytes(TRACKER_SEED))
            for text in case["outputs"]:
                register.record_policy_output(ATTEMPT, text)
            entry = register.submit_confirmation(d.signed(case["report"]))
            assert set(entry.reasons) <= CONTENT_REASONS
            assert entry.counted or entry.echo_collision
            event(f"collision={entry.echo_collision} recurred={case['recurred']}")
            if case["recurred"]:
                settled = d.settle(case["report"], "0")
                assert settled.final <= without
                assert settled.final < without  # a recurrence always costs the policy
            elif entry.counted:
                assert d.settle(case["report"], "1").final == without
            else:
                before = store.size()
                with pytest.raises(IntegrityError, match="provenance register"):
                    d.settle(case["report"], "1")
                assert store.size() == before
        finally:
            store.close()
