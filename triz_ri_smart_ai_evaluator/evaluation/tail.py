"""Views of the ledger kept per open store and brought up to the log's end on each call.

A view folds the events of a few kinds into lookups: the task instances and their awards
(``instances``), the rules versions the ledger publishes (``attempts.rules_published_in``).  A
service consults them on every submission, and rescanning the log each time would be O(n); so
every view of a store is advanced together, by ONE read of the events appended since the last
call - one round trip on PostgreSQL (issue 16 item 4).  The read starts at the last event seen
and checks that it is still there with the same SHA-256: a group commit that was rolled back,
or a ledger file replaced under the store, is read again from the start, never kept as a
phantom.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..ledger.events import EventKind
from ..ledger.store import LedgerStore

#: An end past any log: the read goes to the end as it is when the database answers, in one
#: page (no separate size query first).
_TO_THE_END = 2**62


class View(Protocol):
    def read(self, seq: int, fields: dict[str, Any]) -> None:
        """Take in one event of a kind the view was registered for (``fields``: its body)."""
        ...


V = TypeVar("V", bound=View)
_KINDS: dict[type[Any], frozenset[str]] = {}


def view_of(*kinds: EventKind) -> Callable[[type[V]], type[V]]:
    """Register a view class (constructed with no arguments) for events of ``kinds``."""

    def register(cls: type[V]) -> type[V]:
        _KINDS[cls] = frozenset(k.value for k in kinds)
        return cls

    return register


@dataclass(slots=True)
class _Tail:
    views: dict[type[Any], Any] = field(default_factory=dict)
    seen: int = 0
    last: bytes = b""  # SHA-256 of the body at ``seen``
    markers: tuple[bytes, ...] = ()
    held: int = 0  # depth of read_once blocks
    read: bool = False  # read already inside the outermost one

    def reset(self) -> None:
        """Forget everything read: every registered view empty, nothing seen."""
        kinds = sorted(set().union(*_KINDS.values()))
        self.views = {cls: cls() for cls in _KINDS}
        self.markers = tuple(f'"kind":"{k}"'.encode() for k in kinds)
        self.seen, self.last = 0, b""


_TAILS: weakref.WeakKeyDictionary[Any, _Tail] = weakref.WeakKeyDictionary()


def _advance(tail: _Tail, rows: Iterable[tuple[int, bytes]]) -> bool:
    """Feed ``rows`` (from ``tail.seen``, or 1 on a fresh tail) to the views.  False when the
    row at ``tail.seen`` is not the one read before (the caller starts again)."""
    check = tail.seen
    for seq, body in rows:
        if check:
            if seq != check or hashlib.sha256(body).digest() != tail.last:
                return False
            check = 0
            continue
        if any(m in body for m in tail.markers):
            fields = json.loads(body)
            for cls, view in tail.views.items():
                if fields["kind"] in _KINDS[cls]:
                    view.read(seq, fields)
        tail.seen, tail.last = seq, hashlib.sha256(body).digest()
    return not check  # a log shorter than what was seen is not the log read before


def _tail(store: LedgerStore) -> _Tail:
    try:
        tail = _TAILS.get(store)
        if tail is None:
            tail = _TAILS[store] = _Tail()
    except TypeError:  # a store that cannot be weakly referenced: nothing is kept
        tail = _Tail()
    if set(tail.views) != set(_KINDS):  # new, or a view was registered since: read it all
        tail.reset()
    return tail


def current(store: LedgerStore, view: type[V]) -> V:
    """``view`` of ``store``, brought up to the log's end (inside :func:`read_once`, only by
    the first call of the block)."""
    tail = _tail(store)
    if not (tail.held and tail.read):
        if not _advance(tail, store.scan(max(tail.seen, 1), _TO_THE_END)):
            tail.reset()
            _advance(tail, store.scan(1, _TO_THE_END))
        tail.read = bool(tail.held)
    found: V = tail.views[view]
    return found


@contextlib.contextmanager
def read_once(store: LedgerStore) -> Iterator[None]:
    """Within the block the views of ``store`` are read up to the end once, by the first
    :func:`current`: for a caller that consults several views at one moment and appends
    nothing before it is done (a submission's checks: one round trip, not one per view)."""
    tail = _tail(store)
    tail.held += 1
    try:
        yield
    finally:
        tail.held -= 1
        if not tail.held:
            tail.read = False
