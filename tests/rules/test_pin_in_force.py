"""Which rules a new attempt runs under (spec 4.4, 10.5): the published version in force when
it starts, so a version published ahead of its effective_from changes nothing until then."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.errors import IntegrityError, RuleError
from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue, load_task_class
from triz_ri_smart_ai_evaluator.rules.published import (
    BUNDLED_STORE,
    RulesStore,
    pin_in_force,
    pin_published,
)
from triz_ri_smart_ai_evaluator.rules.versions import rules_version

CLASS = "defect_fix_delayed_confirmation"
TOY = (Path(__file__).resolve().parent.parent / "plugins" / "toy_task_class" / "toy_triz_class"
       / "toy_sum.yaml")


def test_the_previous_version_stays_in_force_until_the_new_one_takes_effect():
    history = RulesStore(BUNDLED_STORE).history(CLASS)
    assert len(history) >= 2, "the class has a version published ahead of its start"
    tc = load_catalogue()[CLASS]
    new = rules_version(tc)
    starts = datetime.fromisoformat(str(tc.effective_from).replace("Z", "+00:00"))
    before = pin_in_force(tc, started_at=starts - timedelta(seconds=1))
    at = pin_in_force(tc, started_at=starts)
    assert before.version != new
    assert before.version == str(history[-2]["version"])
    assert at.version == new


def test_a_class_nobody_published_is_pinned_from_its_own_file():
    toy = load_task_class(TOY)
    pinned = pin_in_force(toy, started_at=datetime(2026, 12, 4, tzinfo=UTC))
    assert pinned.version == rules_version(toy)


def test_an_unpublished_change_to_a_published_class_is_refused():
    tc = load_catalogue()[CLASS]
    successor = tc.model_copy(update={"title": tc.title + " (edited, not published)",
                                      "effective_from": datetime(2027, 2, 1, tzinfo=UTC)})
    with pytest.raises(RuleError, match="not published"):
        pin_in_force(successor, started_at=datetime(2027, 2, 2, tzinfo=UTC))
    in_place = tc.model_copy(update={"title": tc.title + " (edited in place)"})
    with pytest.raises(IntegrityError, match="differs from the published rules"):
        pin_in_force(in_place, started_at=datetime(2027, 2, 2, tzinfo=UTC))


def test_kept_answers_change_exactly_where_a_version_or_benchmark_takes_effect():
    """pin_in_force keeps its answers between the instants where they can change (issue 16
    item 4); asked around every such instant, in any order and again, it answers what pinning
    from the files answers (pin_published, which keeps nothing of its own)."""
    store = RulesStore(BUNDLED_STORE)
    tc = load_catalogue()[CLASS]
    instants = set()
    for record in store.history(CLASS):
        published = store.load(CLASS, str(record["version"]))
        instants.add(published.effective_from)
        instants.update(v.effective_from for bm in published.benchmarks for v in bm.versions)
    tick = timedelta(microseconds=1)
    moments = [t + d for t in sorted(instants) for d in (-tick, timedelta(0), tick)]
    moments.append(max(instants) + timedelta(days=3650))
    order = moments * 2
    random.Random(7).shuffle(order)
    seen = set()
    for at in order:
        try:
            expected = pin_published(store, tc, started_at=at)
        except RuleError:
            with pytest.raises(RuleError):
                pin_in_force(tc, started_at=at)
            continue
        got = pin_in_force(tc, started_at=at)
        assert (got.version, dict(got.benchmarks)) == (expected.version,
                                                       dict(expected.benchmarks)), at
        seen.add(got.version)
    assert len(seen) >= 2  # the test crossed a change of version
