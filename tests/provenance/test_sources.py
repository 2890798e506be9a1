"""Sources: the provenance items of spec 9.15 and 1.24, kept as an append-only history.

Also 10.8 (origins are distinguishable) and the clear InputError contract for malformed input.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from tests.provenance.conftest import ATTEMPT, INDEPENDENT_TEXT, T0, World
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.provenance import (
    Authentication,
    AuthMethod,
    Origin,
    PolicyAccess,
    Reason,
    SourceRecord,
    Status,
)


def test_amendment_history_keeps_every_revision_in_order(world: World) -> None:
    """9.15 "history of changes": amendments append revisions; the old ones stay, in order,
    in the register and in the ledger itself."""
    src = world.source("bank-feed")
    r2 = world.register.amend_source(replace(src, independence="moved to a separate account"),
                                     change="isolation improved")
    r3 = world.register.amend_source(replace(r2, quarantined=True,
                                             quarantine_reason="feed outage under review"),
                                     change="incident 12")
    history = world.register.source_history("bank-feed")
    assert [h.record.revision for h in history] == [1, 2, 3]
    assert [h.change for h in history] == ["registered", "isolation improved", "incident 12"]
    assert history[0].record == src
    assert history[1].record.independence == "moved to a separate account"
    assert history[2].record == r3
    assert [h.seq for h in history] == sorted(h.seq for h in history)
    revisions = [ev.data["source"]["revision"] for ev in world.all_events()
                 if ev.kind in ("source.registered", "source.amended")]
    assert revisions == [1, 2, 3]
    # The quarantine decision itself is announced as a quarantine change of the source.
    notice = [ev.data for ev in world.all_events() if ev.kind == "quarantine.changed"]
    assert notice[-1]["subject"] == "source"
    assert notice[-1]["status"] == "quarantined"
    assert notice[-1]["revision"] == 3


def test_confirmation_from_a_source_quarantined_by_amendment_is_not_counted(world: World) -> None:
    """1.22/9.15: a source in quarantine cannot confirm, however well it signs."""
    src = world.source("bank-feed")
    world.register.amend_source(replace(src, quarantined=True, quarantine_reason="suspected leak"),
                                change="incident 12")
    entry = world.submit("bank-feed", INDEPENDENT_TEXT)
    assert entry.reasons == (Reason.SOURCE_QUARANTINED,)
    assert entry.decision.authenticated
    assert world.register.counts_as_independent(ATTEMPT) == ()


def test_quarantining_a_source_holds_back_what_it_confirmed_before(world: World) -> None:
    """1.22: data associated with a quarantined source is excluded until it is cleared."""
    src = world.source("bank-feed")
    entry = world.submit("bank-feed", INDEPENDENT_TEXT)
    assert [e.receipt for e in world.register.counts_as_independent(ATTEMPT)] == [entry.receipt]
    held = world.register.amend_source(
        replace(src, quarantined=True, quarantine_reason="key may have leaked"), change="inc 9")
    assert world.register.counts_as_independent(ATTEMPT) == ()
    world.register.amend_source(replace(held, quarantined=False, quarantine_reason=None),
                                change="inc 9 closed")
    assert [e.receipt for e in world.register.counts_as_independent(ATTEMPT)] == [entry.receipt]


def test_source_quarantine_lifted_then_confirmation_released_by_reconciliation(
    world: World,
) -> None:
    """9.15 "quarantine status and reconciliation results": once the source is clear, its held
    confirmation may be released with the verification as evidence - and then counts."""
    src = world.source("bank-feed")
    held = world.register.amend_source(
        replace(src, quarantined=True, quarantine_reason="suspected leak"), change="incident 12")
    entry = world.submit("bank-feed", INDEPENDENT_TEXT)
    with pytest.raises(InputError, match="still in quarantine"):
        world.register.reconcile(entry.receipt, outcome="released", note="checked",
                                 evidence=b"audit report")
    world.register.amend_source(replace(held, quarantined=False, quarantine_reason=None),
                                change="incident 12 closed: no leak")
    released = world.register.reconcile(entry.receipt, outcome="released",
                                        note="feed integrity verified", evidence=b"audit 12")
    assert released.status is Status.RELEASED
    assert released.reconciliation is not None
    assert released.reconciliation.evidence is not None
    assert world.store.get_evidence(released.reconciliation.evidence) == b"audit 12"
    assert [e.receipt for e in world.register.counts_as_independent(ATTEMPT)] == [entry.receipt]


@pytest.mark.parametrize(
    ("field", "value"),
    [("origin", Origin.HUMAN_LABELLING), ("created_at", T0 - timedelta(days=9))],
)
def test_identity_fields_cannot_be_amended(world: World, field: str, value: object) -> None:
    """9.16/10.8: an origin label is not laundered by amendment; register a new source."""
    src = world.source("bank-feed")
    with pytest.raises(InputError, match="cannot be amended"):
        world.register.amend_source(replace(src, **{field: value}), change="relabel")
    assert len(world.register.source_history("bank-feed")) == 1


def test_synthetic_label_cannot_be_removed(world: World) -> None:
    """9.16: synthetic data stays labelled."""
    src = world.source("generator", origin=Origin.SYNTHETIC, synthetic=True)
    with pytest.raises(InputError, match="synthetic"):
        world.register.amend_source(replace(src, synthetic=False), change="relabel")


def test_amending_a_stale_revision_is_refused(world: World) -> None:
    src = world.source("bank-feed")
    world.register.amend_source(replace(src, party="bank feed v2"), change="renamed")
    with pytest.raises(InputError, match="revision"):
        world.register.amend_source(replace(src, party="lost update"), change="stale")


def test_registering_a_source_twice_is_refused(world: World) -> None:
    world.source("bank-feed")
    with pytest.raises(InputError, match="already registered"):
        world.source("bank-feed")


def test_origins_are_stored_distinguishably(world: World) -> None:
    """10.8: each of the five origins survives the ledger round trip unchanged."""
    for origin in Origin:
        world.source(f"src-{origin.value}", origin=origin,
                     synthetic=origin is Origin.SYNTHETIC)
    state = world.reopen().state
    assert {state.current_source(f"src-{o.value}").origin for o in Origin} == set(Origin)  # type: ignore[union-attr]


# -- malformed input: clear InputError ---------------------------------------------------------

def _fields(**overrides: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "id": "bank-feed", "party": "bank", "created_at": T0, "origin": "independent_operational",
        "synthetic": False, "independence": "separate", "policy_access": "none",
        "authentication": Authentication.unsigned(),
    }
    fields.update(overrides)
    return fields


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"origin": "martian"}, "origin 'martian' is not one of: independent_operational"),
        ({"policy_access": "admin"}, "policy access 'admin'"),
        ({"id": "has space"}, "source id"),
        ({"created_at": datetime(2025, 1, 1)}, "timezone-aware"),  # noqa: DTZ001
        ({"origin": "synthetic"}, "synthetic flag"),
        ({"quarantined": True}, "quarantine reason"),
        ({"quarantine_reason": "why"}, "not quarantined"),
        ({"independence": "  "}, "degree of independence"),
        ({"revision": 0}, "revision"),
    ],
)
def test_malformed_source_raises_input_error(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        SourceRecord(**_fields(**overrides))  # type: ignore[arg-type]


def test_source_from_data_reads_back_and_rejects_unknown_origin() -> None:
    record = SourceRecord(**_fields())  # type: ignore[arg-type]
    assert SourceRecord.from_data(record.to_data()) == record
    with pytest.raises(InputError, match="origin 'martian'"):
        SourceRecord.from_data({**record.to_data(), "origin": "martian"})


@pytest.mark.parametrize(
    ("key_id", "public_key", "message"),
    [
        ("0" * 64, base64.b64encode(b"\x01" * 31).decode(), "32 bytes"),
        ("0" * 64, "not base64", "not valid base64"),
        ("0" * 64, base64.b64encode(b"\x01" * 32).decode().rstrip("="), "base64"),
        ("0" * 64, base64.b64encode(b"\x01" * 32).decode(), "key id does not match"),
        ("XYZ", base64.b64encode(b"\x01" * 32).decode(), "64 lower-case hex"),
    ],
)
def test_bad_key_raises_input_error(key_id: str, public_key: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Authentication(AuthMethod.ED25519, key_id, public_key)


def test_unsigned_authentication_with_a_key_is_refused() -> None:
    with pytest.raises(InputError, match="carries no key"):
        Authentication(AuthMethod.UNSIGNED, "0" * 64, None)
    with pytest.raises(InputError, match="method 'rsa'"):
        Authentication.from_data({"method": "rsa"})


def test_source_the_policy_can_write_never_confirms(
    world: World,
) -> None:
    """9.3: a record the policy can rewrite is not independent."""
    world.source("shared-db", policy_access=PolicyAccess.WRITE)
    entry = world.submit("shared-db", INDEPENDENT_TEXT)
    assert entry.reasons == (Reason.POLICY_CAN_WRITE,)
