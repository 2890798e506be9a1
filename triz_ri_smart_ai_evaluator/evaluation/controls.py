"""Hidden, rotated control sets (spec 9.6, 10.1 "control-data identifiers", 10.7, 11.16; issue 15).

A run's control cases stay hidden until its award is recorded; then the runner reveals the
seed they were drawn from and a fingerprint of every case in ``control.revealed`` in the
class's loop subject (``loop/<class>``).  A revealed case is exposed: the policy may have
learnt it, so no later draw of the class uses it again (the set *rotates*).  A case is known by
its fingerprint only, never by its content, so the ledger reveals no case another run could
still use.

Each class decides what one case is for its fingerprint: what the candidate is tested on,
without the labels a run gives every case afresh (ids, tokens), so that the same test with a
new label is still recognised as the same test.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..canonical import canonical_json, sha256_hex
from ..errors import ExternalError, InputError
from ..ledger.events import EventKind, NewEvent
from ..ledger.payloads import ControlRevealed
from ..ledger.store import LedgerStore
from . import loop

ACTOR = "harness"
#: Retired cases a draw may skip before the class's pool counts as exhausted: a class whose case
#: space is small would otherwise draw for ever once most of it has been revealed.
MAX_SKIPS = 10_000


def skip_retired(skipped: int, task_class: str) -> int:
    """One more retired case skipped; raises ExternalError (the attempt ends errored, nothing
    awarded) once the draw skipped more than :data:`MAX_SKIPS`: the pool must be expanded
    (spec 9.6 "the sets are regularly expanded and rotated")."""
    if skipped >= MAX_SKIPS:
        raise ExternalError(f"the control pool of {task_class} is exhausted: more than "
                            f"{MAX_SKIPS} drawn cases were already revealed (spec 9.6: expand "
                            "the pool)")
    return skipped + 1


def fingerprint(case: Any) -> str:
    """SHA-256 (hex) of the case's canonical JSON (RFC 8785): stable across processes, key
    order and runs."""
    return sha256_hex(canonical_json(case))


def retired(store: LedgerStore, task_class: str) -> frozenset[str]:
    """Every fingerprint the class's ``control.revealed`` events name: the cases no later draw
    of the class may use.  Reads the class's whole loop subject."""
    return frozenset(
        str(case) for ev in loop.class_events(store, task_class)
        if ev.kind == EventKind.CONTROL_REVEALED.value for case in ev.data.get("cases", ()))


def reveal(store: LedgerStore, task_class: str, attempt_id: str, seed: bytes, commitment: str,
           cases: Sequence[str], skipped: int, at: datetime) -> int:
    """Record ``control.revealed`` for one run (only once its award, or its error, is
    recorded): the seed in hex, the commitment the ledger held before the draw, the
    fingerprint of every case drawn, in order, and how many retired cases the draw skipped.
    Return the event's seq.  Raises InputError for an empty seed or a negative skip count."""
    if not seed:
        raise InputError("a control set is revealed with the seed it was drawn from")
    if skipped < 0:
        raise InputError(f"skipped {skipped} is not a count")
    data = ControlRevealed(task_class=task_class, attempt=attempt_id, seed=seed.hex(),
                           commitment=commitment, cases=tuple(cases), skipped=skipped)
    return store.append([NewEvent.make(EventKind.CONTROL_REVEALED, data, actor=ACTOR, at=at,
                                       attempt=loop.subject(task_class))])[-1]
