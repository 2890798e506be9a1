"""Authentication: trusted components sign what they submit (spec 9.3, 9.15, 8.15, 11.21).

11.21: "unauthenticated feedback is placed in quarantine" - recorded, never counted.
"""

from __future__ import annotations

import base64
from dataclasses import replace

from tests.provenance.conftest import ATTEMPT, INDEPENDENT_TEXT, World
from triz_ri_smart_ai_evaluator.provenance import (
    Authentication,
    ComponentKey,
    Confirmation,
    Reason,
    Status,
    sign_confirmation,
)


def test_genuine_signed_independent_confirmation_is_accepted_and_counted(world: World) -> None:
    """9.3/9.15: a registered, signed, independent source that does not echo counts once."""
    world.source("bank-feed")
    entry = world.submit("bank-feed", INDEPENDENT_TEXT)
    assert entry.status is Status.ACCEPTED
    assert entry.reasons == ()
    assert entry.decision.key_id == world.key("bank-feed").authentication.key_id
    assert entry.decision.source_revision == 1
    counted = world.register.counts_as_independent(ATTEMPT)
    assert [e.receipt for e in counted] == [entry.receipt]
    assert world.kinds()[-1] == "confirmation.received"  # no quarantine notice


def test_unsigned_confirmation_is_quarantined(world: World) -> None:
    """8.15/11.21: no signature, no count - even from a registered signing source."""
    world.source("bank-feed")
    unsigned = replace(world.signed("bank-feed", INDEPENDENT_TEXT), signature=None)
    entry = world.register.submit_confirmation(unsigned)
    assert entry.status is Status.QUARANTINED
    assert entry.reasons == (Reason.UNSIGNED,)
    assert world.register.counts_as_independent(ATTEMPT) == ()
    assert world.kinds()[-2:] == ["confirmation.received", "quarantine.changed"]


def test_source_registered_as_unsigned_never_counts(world: World) -> None:
    """9.15 allows recording an unsigned source; 8.15 keeps its feedback out of the signal."""
    world.source("hotline", authentication=Authentication.unsigned())
    claim = Confirmation("hotline", ATTEMPT, INDEPENDENT_TEXT, world.clock.now)
    entry = world.register.submit_confirmation(claim)
    assert entry.reasons == (Reason.UNSIGNED,)
    assert world.register.counts_as_independent(ATTEMPT) == ()


def test_confirmation_signed_by_another_key_is_quarantined(world: World) -> None:
    """8.15: a valid signature by the wrong key is a bad signature."""
    world.source("bank-feed")
    impostor = ComponentKey.from_private_bytes(b"\x07" * 32)
    forged = sign_confirmation(impostor, source="bank-feed", attempt=ATTEMPT,
                               content=INDEPENDENT_TEXT, issued_at=world.clock.now)
    entry = world.register.submit_confirmation(forged)
    assert entry.reasons == (Reason.BAD_SIGNATURE,)
    assert not entry.decision.authenticated
    assert world.register.counts_as_independent(ATTEMPT) == ()


def test_tampered_content_breaks_the_signature(world: World) -> None:
    """8.15: changing one character after signing invalidates the confirmation."""
    world.source("bank-feed")
    genuine = world.signed("bank-feed", INDEPENDENT_TEXT)
    tampered = Confirmation("bank-feed", ATTEMPT, INDEPENDENT_TEXT.replace("88", "89"),
                            genuine.issued_at, genuine.signature)
    entry = world.register.submit_confirmation(tampered)
    assert entry.reasons == (Reason.BAD_SIGNATURE,)
    assert world.register.counts_as_independent(ATTEMPT) == ()


def test_signature_moved_to_another_attempt_is_rejected(world: World) -> None:
    """9.3: the attempt link is signed, so a confirmation cannot be re-pointed."""
    world.start_attempt("task-7/attempt-2")
    world.source("bank-feed")
    genuine = world.signed("bank-feed", INDEPENDENT_TEXT)
    moved = replace(genuine, attempt="task-7/attempt-2")
    entry = world.register.submit_confirmation(moved)
    assert entry.reasons == (Reason.BAD_SIGNATURE,)


def test_garbage_signature_is_a_bad_signature_not_a_crash(world: World) -> None:
    world.source("bank-feed")
    for junk in ("not base64!", base64.b64encode(b"x" * 63).decode(), ""):
        bad = replace(world.signed("bank-feed", INDEPENDENT_TEXT), signature=junk)
        assert world.register.submit_confirmation(bad).reasons == (Reason.BAD_SIGNATURE,)


def test_confirmation_from_unknown_source_is_quarantined(world: World) -> None:
    """9.15: a confirmation whose origin is not registered cannot be counted."""
    entry = world.submit("nobody", INDEPENDENT_TEXT)
    assert entry.reasons == (Reason.UNKNOWN_SOURCE,)
    assert world.register.counts_as_independent(ATTEMPT) == ()


def test_key_rotation_by_amendment_retires_the_old_key(world: World) -> None:
    """9.15: the authentication method is part of the source's revision history."""
    source = world.source("bank-feed")
    old_key = world.key("bank-feed")
    new_key = ComponentKey.from_private_bytes(b"\x42" * 32)
    world.register.amend_source(replace(source, authentication=new_key.authentication),
                                change="scheduled key rotation")
    old = world.register.submit_confirmation(sign_confirmation(
        old_key, source="bank-feed", attempt=ATTEMPT, content=INDEPENDENT_TEXT,
        issued_at=world.clock.now))
    assert old.reasons == (Reason.BAD_SIGNATURE,)
    new = world.register.submit_confirmation(sign_confirmation(
        new_key, source="bank-feed", attempt=ATTEMPT, content=INDEPENDENT_TEXT,
        issued_at=world.clock.now))
    assert new.status is Status.ACCEPTED
    assert new.decision.source_revision == 2


def test_forged_unsigned_copy_cannot_block_the_genuine_confirmation(world: World) -> None:
    """An unauthenticated copy submitted first neither makes the genuine one a repeat nor
    a correlated copy: only authenticated confirmations are compared."""
    world.source("bank-feed")
    world.source("other")
    genuine = world.signed("bank-feed", INDEPENDENT_TEXT)
    world.register.submit_confirmation(replace(genuine, signature=None))
    world.register.submit_confirmation(
        Confirmation("other", ATTEMPT, INDEPENDENT_TEXT, genuine.issued_at, genuine.signature))
    entry = world.register.submit_confirmation(genuine)
    assert entry.status is Status.ACCEPTED


def test_replayed_signed_confirmation_is_a_repeat_and_counts_once(world: World) -> None:
    """8.14: the same signed statement submitted again adds nothing."""
    world.source("bank-feed")
    genuine = world.signed("bank-feed", INDEPENDENT_TEXT)
    first = world.register.submit_confirmation(genuine)
    second = world.register.submit_confirmation(genuine)
    assert first.status is Status.ACCEPTED
    assert second.reasons == (Reason.REPEAT,)
    assert len(world.register.counts_as_independent(ATTEMPT)) == 1
