"""Typed event payloads (issue 14 item 4).

The golden ledger below was written by the writers as they were before payloads were typed
(``golden/ledger_bodies.jsonl``, one canonical event body a line); the same calls must keep
producing exactly those bytes, and that ledger must keep verifying and recomputing.
Regenerate only on purpose: ``TRIZ_REGENERATE_GOLDEN=1 pytest tests/ledger/test_payloads.py``.
"""

from __future__ import annotations

import base64
import hashlib
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import JsonValue, ValidationError

from triz_ri_smart_ai_evaluator.access import (
    AccessGuard,
    Action,
    Catalogue,
    CheckSchedule,
    MemoryControlSets,
    Principal,
    Resource,
    Role,
    ScheduleBook,
    TrustedPort,
    load_matrix,
    sign_request,
)
from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.errors import InputError, IntegrityError
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.checkpoint import generate_signer
from triz_ri_smart_ai_evaluator.ledger.events import Event, EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import check_ledger
from triz_ri_smart_ai_evaluator.ledger.merkle import leaf_hash
from triz_ri_smart_ai_evaluator.ledger.payloads import (
    PAYLOADS,
    CommentAdded,
    EscrowHeld,
    OpenPayload,
    Payload,
    models_of,
    payload_of,
    verify_data,
)
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.record import attempt_record
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy, LedgerStore
from triz_ri_smart_ai_evaluator.provenance import (
    ComponentKey,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    SourceRecord,
    sign_confirmation,
)
from triz_ri_smart_ai_evaluator.provenance import register as provenance_register
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.rules.versions import PinnedRules, rules_from_canonical
from triz_ri_smart_ai_evaluator.signal.inputs import AttemptInputs

from ..signal.factories import DEFECT, PILOT
from ._attempt_cli import with_stored_evidence
from ._tamper import forged

HERE = Path(__file__).parent / "golden"
GOLDEN = HERE / "ledger_bodies.jsonl"
T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
REPORT = {"defect": "D-17", "recurrence_reports": 0, "observation_days": 14}
OBSTACLE = {"kind": "external_tool_failure", "indicators": ["recovery", "regression"],
            "recorded_by": "harness", "description": "the SMTP relay of the sandbox was down",
            "standard_followed": True, "evidence": []}


def task_class(class_id: str) -> TaskClass:
    """The class's rules as committed with the golden file (the catalogue may move on)."""
    text = (HERE / f"{'defect' if class_id == DEFECT else 'pilot'}_rules.json").read_bytes()
    return rules_from_canonical(text, hashlib.sha256(text).hexdigest())


def _inputs(name: str) -> AttemptInputs:
    return AttemptInputs.model_validate_json((HERE / f"{name}_inputs.json").read_bytes())


class _Clock:
    def __init__(self) -> None:
        self.now = T0 + timedelta(days=15)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def _stored(store: LedgerStore, attempt_id: str, label: str) -> str:
    """Evidence content for ``label`` stored with its ``evidence.stored`` event."""
    data = label.encode()
    digest = store.put_evidence(data)
    store.append([NewEvent.make(EventKind.EVIDENCE_STORED,
                                {"what": label, "digest": digest, "size": len(data)},
                                actor="harness", at=T0, attempt=attempt_id)])
    return digest


def write_golden_ledger(store: LedgerStore) -> None:
    """Every writer of ``evaluation.attempts`` once, with fixed clocks: a delayed attempt settled
    through the provenance register, a pilot attempt with every kind of raw input (degree,
    omitted self-check, obstacle, claim, an unresolved digest), one with raw
    measurements only, abandoned."""
    # 1: delayed class, escrow held, settled by an accepted confirmation.
    pinned = pin(task_class(DEFECT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id="defect-1", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(days=14), control_ids=["c-2", "c-1"],
                      verifier_version="v-1", artefact_sha256="ab" * 32, instance="inst-1")
    attempts.evaluate(store, pinned, _inputs("defect"), attempt_id="defect-1", at=T0)
    register = ProvenanceRegister(store, actor="provenance-register", clock=_Clock())
    key = ComponentKey.from_private_bytes(b"t" * 32)
    register.register_source(SourceRecord(
        id="issue_tracker", party="issue tracker webhook", created_at=T0 - timedelta(days=30),
        origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
        independence="operators file recurrences; no path from the policy",
        policy_access=PolicyAccess.NONE, authentication=key.authentication))
    register.record_policy_output("defect-1", "fixed, verified, closed")
    register.submit_confirmation(sign_confirmation(
        key, source="issue_tracker", attempt="defect-1", content=REPORT,
        issued_at=T0 + timedelta(days=14)))
    digest = hashlib.sha256(canonical_json(REPORT)).hexdigest()
    late = {"recurrence_free": {"value": "1", "source": "issue_tracker", "evidence": [digest]}}
    attempts.settle(store, "defect-1", late=late, at=T0 + timedelta(days=15),
                    provenance=register)
    # 2: pilot class, every raw input kind.
    pinned = pin(task_class(PILOT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id="pilot-2", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(hours=1))
    inputs = _inputs("pilot")
    inputs = with_stored_evidence(store, "pilot-2", inputs)
    # one digest no one stored: recorded as unresolved
    delivery = inputs.measurements["delivery"].model_copy(update={"evidence": ("cd" * 32,)})
    inputs = inputs.model_copy(update={"measurements": {**inputs.measurements,
                                                        "delivery": delivery}})
    _stored(store, "pilot-2", "note")
    attempts.evaluate(store, pinned, inputs, attempt_id="pilot-2", at=T0 + timedelta(minutes=1))
    # 3: initiated, never finished.
    attempts.initiate(store, pinned, attempt_id="lost-3", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(hours=1))
    attempts.record_measurements(store, "lost-3", inputs, at=T0)
    _through_the_trusted_port(store, register, pinned)
    attempts.reconcile(store, now=T0 + timedelta(days=30))


def _through_the_trusted_port(store: LedgerStore, register: ProvenanceRegister,
                              pinned: PinnedRules) -> None:
    """4: what the trusted port writes for a harness, a verifier and the owner
    (signed requests)."""
    attempts.initiate(store, pinned, attempt_id="port-4", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(days=60))
    clock = _Clock()
    guard = AccessGuard(load_matrix(), store)
    for n, (role, pid) in enumerate(((Role.HARNESS, "harness-1"), (Role.VERIFIER, "verifier-1"),
                                     (Role.OWNER, "owner-1"))):
        key = ComponentKey.from_private_bytes(bytes([n + 1]) * 32)
        register.register_source(SourceRecord(
            id=pid, party="test operator", created_at=T0, origin=Origin.INDEPENDENT_OPERATIONAL,
            synthetic=False, independence="runs outside the policy's reach",
            policy_access=PolicyAccess.NONE, authentication=key.authentication))
        principal = Principal(pid, role)
        port = TrustedPort(guard, principal, register=register,
                           catalogue=Catalogue({PILOT: pinned.task_class}),
                           control_sets=MemoryControlSets({}), clock=clock,
                           schedule=ScheduleBook(CheckSchedule.create(["verifier-1"])))

        def send(resource: Resource, body: dict[str, Any], *, port: TrustedPort = port,
                 principal: Principal = principal, key: ComponentKey = key) -> None:
            port.request(resource, Action.APPEND,
                         sign_request(key, principal, resource, Action.APPEND, body))

        if role is Role.HARNESS:
            send(Resource.EVIDENCE, {"attempt_id": "port-4", "what": "harness_log",
                                     "content_b64": base64.b64encode(b"log").decode()})
            send(Resource.RAW_MEASUREMENTS, {"attempt_id": "port-4",
                                             "inputs": {"claims": ["ready"]}})
        elif role is Role.VERIFIER:
            send(Resource.VERIFIER_DECISIONS, {"attempt_id": "port-4", "decision": {
                "verdict": "rejected", "note": "step 2 is not in the source"}})
        else:
            send(Resource.QUARANTINE, {"attempt_id": "port-4", "status": "quarantined",
                                       "reason": "under review"})
    send(Resource.ATTEMPTS, {"attempt_id": "port-4", "outcome": "verification_failed",
                             "reason": "rejected"})


def _bodies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    # the register's receipts are random; the golden file needs one fixed receipt
    monkeypatch.setattr(provenance_register.secrets, "token_hex", lambda n: "5e" * n)
    signer = generate_signer("payloads.test/log")
    store = SqliteStore.open(tmp_path / "golden.db", policy=CheckpointPolicy(signer, signer.name))
    try:
        write_golden_ledger(store)
        report = recompute_ledger(store)
        assert report.ok, report.mismatches
        assert report.attempts == 2
        verified = check_ledger(store, log_key=signer.verifier)
        assert verified.ok, verified
        return [body for _, body in store.scan()]
    finally:
        store.close()


def test_the_writers_reproduce_the_golden_ledger_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = _bodies(tmp_path, monkeypatch)
    if os.environ.get("TRIZ_REGENERATE_GOLDEN") == "1":
        GOLDEN.write_bytes(b"".join(b + b"\n" for b in bodies))
    assert bodies == GOLDEN.read_bytes().splitlines()


# -- the models --------------------------------------------------------------------------------
def test_every_event_kind_has_a_payload_model() -> None:
    assert set(PAYLOADS) == set(EventKind)


def test_every_event_of_the_golden_ledger_reads_and_writes_back_the_same_bytes() -> None:
    for seq, body in enumerate(GOLDEN.read_bytes().splitlines(), 1):
        event = Event(seq, body, leaf_hash(body))
        payload = payload_of(event)
        new = NewEvent.make(event.kind, payload, actor=event.fields["actor"],
                            at=event.fields["at"], attempt=event.fields["attempt"])
        assert new.body(seq=seq, prev=event.fields["prev"]) == body


_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


def _values(annotation: Any) -> st.SearchStrategy[Any]:
    """JSON values that fit ``annotation`` (a field type of a payload model)."""
    if annotation is JsonValue:
        return _JSON
    if isinstance(annotation, type) and issubclass(annotation, Payload):
        return _data(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _values(args[0])
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, UnionType):
        return st.one_of(*(_values(a) for a in args))
    if origin is tuple:
        return st.lists(_values(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(_TEXT, _values(args[1]), max_size=3)
    return {str: _TEXT, int: st.integers(-(2**53) + 1, 2**53 - 1), bool: st.booleans(),
            type(None): st.none()}[annotation]


def _data(model: type[Payload]) -> st.SearchStrategy[dict[str, Any]]:
    """Payload data of ``model``: every required field, each optional one given or not."""
    required, optional = {}, {}
    for name, info in model.model_fields.items():
        if name == "v":
            continue
        always = info.is_required() or name in model.ALWAYS_WRITTEN
        (required if always else optional)[name] = _values(info.annotation)
    return st.fixed_dictionaries(required, optional=optional)


_MODELS = sorted({c for k in PAYLOADS for c in models_of(k)}, key=lambda c: c.__name__)


@pytest.mark.parametrize("model", _MODELS, ids=lambda m: m.__name__)
@given(data=st.data())
def test_a_payload_round_trips_through_its_canonical_bytes(model: type[Payload],
                                                           data: st.DataObject) -> None:
    given_data = data.draw(_data(model))
    payload = model.model_validate(given_data)
    assert payload.to_data() == given_data  # nothing added, nothing dropped, nothing coerced
    again = model.model_validate_json(canonical_json(payload.to_data()))
    assert again == payload
    assert canonical_json(again.to_data()) == canonical_json(given_data)


@pytest.mark.parametrize(("kind", "data", "where"), [
    (EventKind.MEASUREMENT_RAW, {"what": "indicator", "id": "x", "source": "s"}, "value"),
    (EventKind.MEASUREMENT_RAW, {"what": "guess", "id": "x"}, "what"),
    (EventKind.EVIDENCE_STORED, {"what": "log", "digest": "ab", "size": "3"}, "size"),
    (EventKind.ESCROW_HELD, {"held": "1", "payable_now": "1", "bonus": "9"}, "bonus"),
    (EventKind.TRAINING_INCLUDED, {"included": 1, "mode": "full", "verified": True}, "included"),
])
def test_a_malformed_stored_payload_is_reported_with_its_seq_and_kind(
    kind: EventKind, data: dict[str, Any], where: str
) -> None:
    honest = NewEvent.make(EventKind.COMMENT_ADDED, {"text": "x"}, actor="tester", at=T0)
    body = forged(honest, data, kind=kind.value).body(seq=7, prev="0" * 64)  # stored, unchecked
    with pytest.raises(IntegrityError, match=rf"event 7 \({kind.value}\): .*{where}"):
        payload_of(Event(7, body, leaf_hash(body)))


def test_a_model_of_another_kind_is_refused_when_written() -> None:
    with pytest.raises(InputError, match=r"escrow\.held"):
        NewEvent.make(EventKind.ESCROW_HELD, CommentAdded(text="hi"), actor="tester", at=T0)


_CLOSED = [k for k in EventKind if not all(issubclass(m, OpenPayload) for m in models_of(k))]


@pytest.mark.parametrize("kind", _CLOSED, ids=str)
def test_a_plain_object_that_does_not_fit_its_kind_is_refused_naming_kind_and_field(
    kind: EventKind,
) -> None:
    # A closed model refuses the unknown field, or names the first required one it lacks
    # (``what``, the discriminator of a raw measurement).
    with pytest.raises(InputError, match=rf"{kind.value}.* (bogus|\w+): "):
        verify_data(kind, {"bogus": 1})


@pytest.mark.parametrize("kind", _CLOSED, ids=str)
def test_a_plain_object_that_does_not_fit_its_kind_is_refused_when_written(
    kind: EventKind,
) -> None:
    """NewEvent.make checks a plain object as verify_data does: no unchecked write path."""
    with pytest.raises(InputError, match=rf"{kind.value}.* (bogus|\w+): "):
        NewEvent.make(kind, {"bogus": 1}, actor="tester", at=T0)


@pytest.mark.parametrize("kind", sorted(set(EventKind) - set(_CLOSED)), ids=str)
def test_an_open_record_keeps_its_details_but_checks_its_typed_fields(kind: EventKind) -> None:
    typed = {"step": "s1", "state": "inspected"}
    assert verify_data(kind, {**typed, "bogus": 1}).to_data() == {**typed, "bogus": 1}
    with pytest.raises(InputError, match=rf"{kind.value}.* v: "):
        verify_data(kind, {**typed, "v": 2})


def test_a_plain_object_is_checked_strictly() -> None:
    with pytest.raises(InputError, match=r"escrow\.held.* held: "):
        verify_data(EventKind.ESCROW_HELD, {"held": 1, "payable_now": "1"})
    with pytest.raises(InputError, match="unknown event kind"):
        verify_data("escrow.kept", {})


def test_every_golden_payload_passes_the_write_check() -> None:
    for seq, body in enumerate(GOLDEN.read_bytes().splitlines(), 1):
        event = Event(seq, body, leaf_hash(body))
        verify_data(event.kind, event.data)


def test_a_new_write_refuses_an_unknown_field() -> None:
    with pytest.raises(ValidationError, match="bonus"):
        EscrowHeld(held="1", payable_now="1", bonus="9")  # type: ignore[call-arg]


def test_a_malformed_raw_measurement_stops_recompute_and_the_record_naming_the_event(
    tmp_path: Path,
) -> None:
    """A measurement the writer never wrote (a cost as a number) in an awarded attempt: the
    readers name it rather than compute from it or fail with a KeyError."""
    store = SqliteStore.open(tmp_path / "odd.db")
    try:
        pinned = pin(task_class(PILOT), started_at=T0)
        attempts.initiate(store, pinned, attempt_id="odd-1", task_version="1", started_at=T0,
                          deadline=T0 + timedelta(hours=1))
        cost = NewEvent.make(EventKind.MEASUREMENT_RAW,
                             {"what": "cost", "id": "smtp_calls", "value": "3"},
                             actor="harness", at=T0, attempt="odd-1")
        # stored as an owner of the database writes it, past NewEvent.make's check
        odd = forged(cost, {"what": "cost", "id": "smtp_calls", "value": 3})
        [seq] = store.append([odd])
        attempts.evaluate(store, pinned, _inputs("pilot"), attempt_id="odd-1", at=T0)
        expected = rf"event {seq} \(measurement\.raw\): .*value"
        with pytest.raises(IntegrityError, match=expected):
            recompute_ledger(store)
        with pytest.raises(IntegrityError, match=expected):
            attempt_record(store.attempt_events("odd-1"))
        with pytest.raises(IntegrityError, match=expected):
            attempts.inputs_from_events(store.attempt_events("odd-1"))
    finally:
        store.close()
