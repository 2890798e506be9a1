"""The ledger is the only truth: the register's state is a fold over its events.

Spec 9.15 (provenance is stored), 10.4 and 1.17 (append-only log), 10.2 (reproducible).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from tests.provenance.conftest import ATTEMPT, INDEPENDENT_TEXT, POLICY_OUTPUT, T0, World
from triz_ri_smart_ai_evaluator.errors import IntegrityError
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.provenance import (
    Authentication,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    SourceRecord,
    fingerprint,
)

REVIEW = (
    "Checked the invoice run for account 4471 against the bank feed; every line item is "
    "present, the VAT lines agree with the regional table and the closing balance is right."
)


def _busy_history(world: World) -> None:
    src = world.source("bank-feed")
    world.source("site-a")
    world.source("site-b", origin=Origin.HUMAN_LABELLING)
    world.source("model-echo", origin=Origin.EVALUATED_MODEL_OUTPUT)
    world.register.amend_source(replace(src, independence="now on its own network"),
                                change="isolation")
    world.submit("bank-feed", INDEPENDENT_TEXT)
    first = world.submit("site-a", REVIEW)
    world.submit("site-b", REVIEW.lower())
    world.submit("model-echo", POLICY_OUTPUT)
    world.submit("site-a", {"verdict": "correct"})
    world.register.reconcile(first.receipt, outcome="released", note="verified", evidence=b"e")


def test_state_rebuilt_from_a_reopened_sqlite_file_equals_the_state_before(world: World) -> None:
    """10.4/9.15: closing and reopening the ledger file loses and invents nothing."""
    _busy_history(world)
    before = world.register.state.snapshot()
    counted_before = world.register.counts_as_independent(ATTEMPT)
    register = world.reopen()
    assert register.state.snapshot() == before
    assert register.counts_as_independent(ATTEMPT) == counted_before
    assert before["size"] == world.store.size()
    assert len(before["confirmations"]) == 5


def test_another_register_on_the_same_ledger_sees_every_write(world: World) -> None:
    """The state is never a private truth: a second reader catches up from the log."""
    other = ProvenanceRegister(world.store, actor="auditor", clock=world.clock)
    _busy_history(world)
    assert other.state.snapshot() == world.register.state.snapshot()


def _write(world: World, kind: EventKind, data: dict[str, object], attempt: str | None = None,
           ) -> None:
    world.store.append([NewEvent.make(kind, data, actor="intruder", at=T0, attempt=attempt)])


def _record(revision: int, origin: str = "independent_operational") -> dict[str, object]:
    return SourceRecord(
        id="bank-feed", party="bank", created_at=T0, origin=Origin(origin), synthetic=False,
        independence="separate", policy_access=PolicyAccess.NONE,
        authentication=Authentication.unsigned(), revision=revision,
    ).to_data()


@pytest.mark.parametrize(
    ("forge", "message"),
    [
        pytest.param(
            lambda w: _write(w, EventKind.SOURCE_AMENDED, {"source": _record(2), "change": "x"}),
            "amendment out of order",
        ),
        pytest.param(
            lambda w: (_write(w, EventKind.SOURCE_REGISTERED, {"source": _record(1)}),
                       _write(w, EventKind.SOURCE_AMENDED, {"source": _record(3), "change": "x"})),
            "amendment out of order",
        ),
        pytest.param(
            lambda w: (_write(w, EventKind.SOURCE_REGISTERED, {"source": _record(1)}),
                       _write(w, EventKind.SOURCE_AMENDED,
                              {"source": _record(2, "human_labelling"), "change": "relabel"})),
            "origin cannot be amended",
        ),
        pytest.param(
            lambda w: (_write(w, EventKind.SOURCE_REGISTERED, {"source": _record(1)}),
                       _write(w, EventKind.SOURCE_REGISTERED, {"source": _record(1)})),
            "registered twice",
        ),
        pytest.param(
            lambda w: _write(w, EventKind.SOURCE_REGISTERED,
                             {"source": {**_record(1), "origin": "martian"}}),
            "origin 'martian'",
        ),
        pytest.param(
            lambda w: _write(w, EventKind.QUARANTINE_CHANGED,
                             {"subject": "confirmation", "receipt": "r", "status": "released"}),
            "malformed provenance data",
        ),
        pytest.param(
            lambda w: _write(w, EventKind.POLICY_OUTPUT, {"output": "0" * 64,
                                                          "fingerprint": {"method": "m"}}, ATTEMPT),
            "a fingerprint must have",
        ),
    ],
    ids=["amend-unregistered", "skip-revision", "relabel-origin", "register-twice",
         "unknown-origin", "release-unknown", "malformed-fingerprint"],
)
def test_contradictory_ledger_events_are_refused_on_rebuild(
    make_world: Callable[..., World], forge: Callable[[World], object], message: str
) -> None:
    """1.17: provenance that does not hold is an IntegrityError, never silently skipped."""
    world = make_world()
    forge(world)
    with pytest.raises(IntegrityError, match=message):
        world.reopen()


def test_recorded_decision_whose_status_contradicts_its_reasons_is_refused(world: World) -> None:
    """A forged "accepted" with quarantine reasons cannot be slipped into the log."""
    world.source("bank-feed")
    world.submit("bank-feed", POLICY_OUTPUT)
    event = world.all_events()[-3]
    assert event.kind == "confirmation.received"
    data = event.data
    data["receipt"] = "f" * 32
    data["decision"]["status"] = "accepted"
    _write(world, EventKind.CONFIRMATION_RECEIVED, data, ATTEMPT)
    with pytest.raises(IntegrityError, match="status does not follow"):
        world.reopen()


def test_fingerprint_from_other_minhash_parameters_is_recomputed_from_evidence(
    world: World,
) -> None:
    """fingerprint.METHOD is recorded: an old-method fingerprint is never compared with a new
    one; the text is re-read from the evidence store and fingerprinted again."""
    text = "an older output, fingerprinted with parameters this version does not use today"
    digest = world.store.put_evidence(text.encode())
    old = {**fingerprint(text).to_data(), "method": "minhash/legacy/words3/perm64/seed1"}
    _write(world, EventKind.POLICY_OUTPUT, {"output": digest, "fingerprint": old}, ATTEMPT)
    output = world.reopen().state.output(ATTEMPT, digest)
    assert output is not None
    assert output.fingerprint == fingerprint(text)


def test_quarantine_of_other_subjects_is_left_to_other_modules(world: World) -> None:
    """1.22: quarantine also covers verifier versions and checkpoints; those events are not
    provenance and must not break the register's rebuild."""
    world.source("bank-feed")
    _write(world, EventKind.QUARANTINE_CHANGED,
           {"subject": "verifier", "status": "quarantined", "reason": "v7: exploit 31"})
    before = world.register.state.snapshot()
    assert world.reopen().state.snapshot() == before


def test_source_quarantine_notice_that_disagrees_with_the_revision_is_refused(
    world: World,
) -> None:
    world.source("bank-feed")
    _write(world, EventKind.QUARANTINE_CHANGED,
           {"subject": "source", "source": "bank-feed", "revision": 1, "status": "quarantined",
            "reason": "forged"})
    with pytest.raises(IntegrityError, match="disagrees"):
        world.reopen()
