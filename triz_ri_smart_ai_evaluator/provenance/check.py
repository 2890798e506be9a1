"""The decision about one confirmation: a pure function of the register state (spec 11.21).

No I/O, no clock (the reception time is an argument), no randomness: the same state and the same
confirmation give the same decision (10.2).  Every applicable reason is listed, not just the
first, so the ledger says everything that was wrong with a confirmation.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..rules.indicators import PolicyAccess
from .confirmation import Confirmation, is_valid_signature
from .decision import Decision, EchoMatch, Reason
from .fingerprint import Fingerprint, fingerprint
from .models import AuthMethod, SourceRecord, verify_instant
from .state import RegisterState


def check_confirmation(
    state: RegisterState,
    confirmation: Confirmation,
    received_at: datetime,
    fp: Fingerprint | None = None,
) -> Decision:
    """Accept ``confirmation`` as independent, or say why it is quarantined.

    ``fp`` is the confirmation's fingerprint when the caller has already computed it.  Raises
    InputError only for a naive ``received_at``; a bad signature or an echo is a decision, not
    an error.
    """
    received = verify_instant(received_at, "reception time")
    fp = fp if fp is not None else fingerprint(confirmation.text)
    rules = state.rules
    skew = timedelta(seconds=rules.clock_skew_seconds)
    reasons: set[Reason] = set()

    source = state.current_source(confirmation.source)
    key_id = _authenticate(source, confirmation, reasons)

    seen = state.attempt_seen(confirmation.attempt)
    if seen is None:
        reasons.add(Reason.UNKNOWN_ATTEMPT)

    if source is not None:
        if source.quarantined:
            reasons.add(Reason.SOURCE_QUARANTINED)
        if source.policy_access is PolicyAccess.WRITE:
            reasons.add(Reason.POLICY_CAN_WRITE)
        if source.origin not in rules.admitted_origins:
            reasons.add(Reason.NOT_INDEPENDENT_ORIGIN)
        if source.synthetic:
            reasons.add(Reason.SYNTHETIC_CONTENT)
        if confirmation.issued_at < source.created_at - skew:
            reasons.add(Reason.ANOMALOUS_TIME)  # confirms before the source existed
    if confirmation.issued_at > received + skew:
        reasons.add(Reason.ANOMALOUS_TIME)  # issued in the future
    if seen is not None and confirmation.issued_at < seen - skew:
        reasons.add(Reason.ANOMALOUS_TIME)  # confirms an attempt before it began

    if key_id is not None and state.authenticated_repeat(confirmation.id):
        reasons.add(Reason.REPEAT)

    # 8.14: however the output reached the source, a repeat of it is not independent.  It is
    # still a decision about *confirmation* only: if the signature and every source check
    # hold, the decision is an echo collision (Decision.echo_collision, ADR 0006), which may
    # yet lower the policy's signal - the policy cannot void a trusted report by writing it.
    echoes: tuple[EchoMatch, ...] = state.echoes_of(fp)
    if echoes:
        reasons.add(Reason.ECHO)

    correlated = _correlated(state, confirmation, fp) if key_id is not None else ()
    if correlated:
        reasons.add(Reason.CORRELATED)

    return Decision(
        reasons=tuple(r for r in Reason if r in reasons),
        echo_of=echoes,
        correlated_with=correlated,
        source_revision=None if source is None else source.revision,
        key_id=key_id,
    )


def _authenticate(source: SourceRecord | None, confirmation: Confirmation,
                  reasons: set[Reason]) -> str | None:
    """The verifying key id, or None after adding the reason it does not verify (8.15)."""
    if source is None:
        reasons.add(Reason.UNKNOWN_SOURCE)
        if confirmation.signature is None:
            reasons.add(Reason.UNSIGNED)
        return None
    auth = source.authentication
    if auth.method is AuthMethod.UNSIGNED or confirmation.signature is None:
        reasons.add(Reason.UNSIGNED)
        return None
    if not is_valid_signature(auth, confirmation.signed_message(), confirmation.signature):
        reasons.add(Reason.BAD_SIGNATURE)
        return None
    return auth.key_id


def _correlated(state: RegisterState, confirmation: Confirmation,
                fp: Fingerprint) -> tuple[str, ...]:
    """Receipts of other sources' authenticated free-text confirmations of the same attempt
    that this one nearly duplicates (8.15 "highly correlated": copying, not independence).

    Structured (JSON) confirmations are left out: independent components reporting the same
    value in the same schema are supposed to agree byte for byte.  Unauthenticated ones are
    left out too, so nobody can get a genuine confirmation held by forging a copy of it.
    """
    if not isinstance(confirmation.content, str) or fp.tokens < state.rules.min_tokens:
        return ()
    out = []
    for entry in state.entries(confirmation.attempt):
        if (
            entry.source == confirmation.source
            or not entry.decision.authenticated
            or not entry.free_text
        ):
            continue
        other = entry.fingerprint
        if other.sha256 == fp.sha256 or (
            other.tokens >= state.rules.min_tokens
            and other.matches(fp) >= state.rules.min_matches
        ):
            out.append(entry.receipt)
    return tuple(out)
