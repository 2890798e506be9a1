"""Issue 16 item 4: a submission learns its class's rollback (spec 9.19) from the ledger's tail
view (``loop.rollback_now``) instead of reading the class's loop subject.  The view must say
exactly what the fold over the subject's events says (``rollback_in_force``), after any
sequence of owner decisions on several classes, with other events in between, and again when
the view is read incrementally across appends.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.evaluation import loop
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.payloads import CommentAdded
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore

CLASSES = ("class_a", "class_b")
AT = datetime(2026, 12, 6, tzinfo=UTC)
step = st.tuples(
    st.sampled_from(CLASSES),
    st.sampled_from(["training", "shadow", "suspended", "shut_down"]),
    st.sampled_from(["owner", "rollback", "drill", "divergence"]),
    st.sampled_from([None, "a" * 64, "b" * 64]),
    st.booleans(),  # an unrelated event after it
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, max_size=12))
def test_the_rollback_view_equals_the_fold_over_the_class_subject(
        store: SqliteStore, steps: list[tuple[str, str, str, str | None, bool]]) -> None:
    # the store carries over between examples: the view is read incrementally, never rebuilt
    for task_class, mode, cause, version, noise in steps:
        loop.set_mode(store, task_class, mode, cause=cause,  # type: ignore[arg-type]
                      reason="property", at=AT,
                      rules_version=version if cause == "rollback" else None)
        if noise:
            store.append([NewEvent.make(EventKind.COMMENT_ADDED, CommentAdded(text="x"),
                                        actor="test", at=AT, attempt=f"loop:{task_class}")])
        for c in CLASSES:
            assert loop.rollback_now(store, c) == loop.rollback_in_force(
                loop.class_events(store, c))


def test_a_rollback_and_its_lifting_reach_the_view(store: SqliteStore) -> None:
    assert loop.rollback_now(store, "class_a") is None
    loop.set_mode(store, "class_a", "training", cause="rollback", reason="roll back", at=AT,
                  rules_version="c" * 64)
    assert loop.rollback_now(store, "class_a") == "c" * 64
    assert loop.rollback_now(store, "class_b") is None
    loop.set_mode(store, "class_a", "shadow", cause="owner", reason="pause", at=AT)
    assert loop.rollback_now(store, "class_a") == "c" * 64  # other changes leave it
    loop.set_mode(store, "class_a", "training", cause="rollback", reason="lift", at=AT)
    assert loop.rollback_now(store, "class_a") is None
