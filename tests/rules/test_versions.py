"""Rules versions: content addresses, the append-only store, retrospective changes and pinning.

Spec 2.6 (benchmark established in advance, with version and effective date), 4.1 (the same fixed
version for evaluator and AI), 4.4 (changed only on predefined grounds, recorded as a new
version), 10.5 (new rules apply only to new attempts), 11.8 (no planning from the achieved
level), 10.2/11.13 (reproducibility).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import rfc8785
import yaml

from triz_ri_smart_ai_evaluator.errors import InputError, IntegrityError, RuleError
from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue, parse_task_class
from triz_ri_smart_ai_evaluator.rules.published import BUNDLED_STORE, RulesStore
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.rules.versions import (
    canonical_rules,
    check_no_retrospective_change,
    pin,
    rules_version,
)

HEX64 = re.compile(r"[0-9a-f]{64}")
T0 = datetime(2026, 11, 15, tzinfo=UTC)  # a publication time after the bundled v1 benchmarks


def variant(tc: TaskClass, change: Callable[[dict[str, Any]], None]) -> TaskClass:
    """A validated copy of ``tc`` with ``change`` applied to its JSON form."""
    data = tc.model_dump(mode="json")
    change(data)
    return TaskClass.model_validate(data)


def benchmark_of(data: dict[str, Any], indicator: str) -> dict[str, Any]:
    (bm,) = [b for b in data["benchmarks"] if b["indicator"] == indicator]
    assert isinstance(bm, dict)
    return bm


def add_delivery_v2(effective_from: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        benchmark_of(data, "delivery")["versions"].append(
            {
                "version": 2,
                "value": "1",
                "effective_from": effective_from,
                "ground": "tool_changed",
                "justification": "spec 4.4: the SMTP library is replaced",
            }
        )

    return change


def retitle(data: dict[str, Any]) -> None:
    data["title"] = data["title"] + " (revised)"


def takes_effect(when: str, change: Callable[[dict[str, Any]], None] | None = None
                 ) -> Callable[[dict[str, Any]], None]:
    """``change`` plus a new ``effective_from``: spec 10.5, every new version takes effect
    after its publication and after the version before."""

    def apply(data: dict[str, Any]) -> None:
        if change is not None:
            change(data)
        data["effective_from"] = when

    return apply


LATER = "2027-06-01T00:00:00Z"


# -- the rules version ------------------------------------------------------------------


def test_rules_version_is_64_hex_sha256_of_canonical_bytes(pilot_class: TaskClass) -> None:
    version = rules_version(pilot_class)
    assert HEX64.fullmatch(version)
    assert version == hashlib.sha256(canonical_rules(pilot_class)).hexdigest()


def test_canonical_bytes_are_rfc8785(pilot_class: TaskClass, delayed_class: TaskClass) -> None:
    for tc in (pilot_class, delayed_class):
        data = canonical_rules(tc)
        assert rfc8785.dumps(json.loads(data)) == data
        assert json.loads(data) == tc.model_dump(mode="json")


def test_canonical_form_carries_numbers_as_exact_decimal_strings(delayed_class: TaskClass) -> None:
    """Spec 10.2: no float in the hashed bytes, so no machine-dependent rounding."""
    data = json.loads(canonical_rules(delayed_class))
    assert data["confirmation"]["escrow_share"] == "0.5"
    assert benchmark_of(data, "p95_latency_ms")["versions"][0]["value"] == "250"


def test_rules_version_survives_a_json_round_trip(delayed_class: TaskClass) -> None:
    again = TaskClass.model_validate(json.loads(canonical_rules(delayed_class)))
    assert rules_version(again) == rules_version(delayed_class)


def _reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reverse_keys(v) for k, v in reversed(list(value.items()))}
    if isinstance(value, list):
        return [_reverse_keys(v) for v in value]
    return value


def _reordered(text: str) -> str:
    return yaml.safe_dump(_reverse_keys(yaml.safe_load(text)), sort_keys=False)


def _double_quoted(text: str) -> str:
    return yaml.safe_dump(yaml.safe_load(text), sort_keys=False, default_style='"')


def _single_quoted(text: str) -> str:
    return yaml.safe_dump(yaml.safe_load(text), sort_keys=False, default_style="'", width=60)


def _spelled_differently(text: str) -> str:
    """0.50 for 0.5, 250.0 for 250, a fraction and quoted strings for numbers and text."""
    edits = [
        ("  escrow_share: 0.5\n", "  escrow_share: 0.50\n"),
        ("{version: 1, value: 250,", "{version: 1, value: 250.0,"),
        ("{version: 2, value: 200,", "{version: 2, value: '400/2',"),
        ("  base_unit: 1\n", '  base_unit: "1.000"\n'),
        (
            "  deadline: 14 days after deployment of the fix\n",
            "  deadline: '14 days after deployment of the fix'\n",
        ),
        ("  observation_days: 14\n", "  observation_days: 14  # two weeks\n"),
    ]
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize(
    "respell",
    [
        _reordered,
        _double_quoted,
        _single_quoted,
        _spelled_differently,
        lambda t: _reordered(_spelled_differently(t)),
    ],
    ids=["reordered_keys", "double_quoted", "single_quoted", "0.50_vs_0.5", "all_at_once"],
)
def test_same_rules_spelled_differently_have_the_same_version(
    respell: Callable[[str], str], delayed_text: str, delayed_class: TaskClass
) -> None:
    """Spec 3.4, 10.2: the version depends on the rules, not on how the YAML spells them."""
    text = respell(delayed_text)
    assert text != delayed_text
    assert rules_version(parse_task_class(text, file="respelled.yaml")) == rules_version(
        delayed_class
    )


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "title": retitle,
    "escrow_share": lambda d: d["confirmation"].__setitem__("escrow_share", "0.6"),
    "benchmark_value": lambda d: benchmark_of(d, "p95_latency_ms")["versions"][0].__setitem__(
        "value", "251"
    ),
    "mode": lambda d: d["formula"].__setitem__("mode", "training"),
    "negative_value": lambda d: d["formula"].__setitem__("negative_value", "-0.5"),
    "checklist_order": lambda d: d["checklist"].reverse(),
}


def test_every_edit_gives_a_new_version(delayed_class: TaskClass) -> None:
    versions = {"original": rules_version(delayed_class)}
    for name, change in EDITS.items():
        versions[name] = rules_version(variant(delayed_class, change))
    assert all(HEX64.fullmatch(v) for v in versions.values())
    assert len(set(versions.values())) == len(versions), versions


# -- the store ------------------------------------------------------------------------------


def test_publish_writes_canonical_bytes_under_their_hash(
    pilot_class: TaskClass, tmp_path: Path
) -> None:
    store = RulesStore(tmp_path)
    version, new = store.publish(pilot_class, published_at=T0)
    assert new is True
    assert version == rules_version(pilot_class)
    stored = tmp_path / pilot_class.id / f"{version}.json"
    assert stored.read_bytes() == canonical_rules(pilot_class)
    assert store.load(pilot_class.id, version) == pilot_class
    assert store.history(pilot_class.id) == [{"version": version, "published_at": T0.isoformat()}]


def test_publishing_twice_is_idempotent(pilot_class: TaskClass, tmp_path: Path) -> None:
    store = RulesStore(tmp_path)
    first = store.publish(pilot_class, published_at=T0)
    stored = tmp_path / pilot_class.id / f"{first[0]}.json"
    before = stored.read_bytes()
    second = store.publish(pilot_class, published_at=T0 + timedelta(days=3))
    assert second == (first[0], False)
    assert stored.read_bytes() == before
    assert len(store.history(pilot_class.id)) == 1
    assert sorted(p.name for p in (tmp_path / pilot_class.id).iterdir()) == sorted(
        [stored.name, "history.jsonl"]
    )


def test_old_version_stays_loadable_and_unchanged_after_an_edit(
    pilot_class: TaskClass, tmp_path: Path
) -> None:
    """Spec 10.5: an edited class is a new version; attempts pinned to the old one keep it."""
    store = RulesStore(tmp_path)
    old_version, _ = store.publish(pilot_class, published_at=T0)
    old_bytes = (tmp_path / pilot_class.id / f"{old_version}.json").read_bytes()
    edited = variant(pilot_class, takes_effect(LATER, retitle))
    new_version, new = store.publish(edited, published_at=T0 + timedelta(days=1))
    assert new is True
    assert new_version != old_version
    assert store.load(pilot_class.id, old_version) == pilot_class
    assert (tmp_path / pilot_class.id / f"{old_version}.json").read_bytes() == old_bytes
    assert store.load(pilot_class.id, new_version) == edited
    latest = store.latest(pilot_class.id)
    assert latest is not None
    assert latest[0] == new_version
    assert [r["version"] for r in store.history(pilot_class.id)] == [old_version, new_version]


def test_tampered_stored_file_raises_integrity_error(
    pilot_class: TaskClass, tmp_path: Path
) -> None:
    """One changed byte - still valid JSON and a valid class - is caught by the hash."""
    store = RulesStore(tmp_path)
    version, _ = store.publish(pilot_class, published_at=T0)
    path = tmp_path / pilot_class.id / f"{version}.json"
    data = bytearray(path.read_bytes())
    at = data.index(b"Feedback form")
    data[at] = ord("f")
    path.write_bytes(bytes(data))
    TaskClass.model_validate(json.loads(data))  # the tampered rules would still validate
    with pytest.raises(IntegrityError):
        store.load(pilot_class.id, version)
    with pytest.raises(IntegrityError):
        store.publish(pilot_class, published_at=T0)  # re-publishing verifies the stored bytes
    with pytest.raises(IntegrityError):
        store.latest(pilot_class.id)


def test_stored_file_renamed_to_another_hash_raises_integrity_error(
    pilot_class: TaskClass, tmp_path: Path
) -> None:
    store = RulesStore(tmp_path)
    old_version, _ = store.publish(pilot_class, published_at=T0)
    new_version, _ = store.publish(variant(pilot_class, takes_effect(LATER, retitle)),
                                   published_at=T0)
    folder = tmp_path / pilot_class.id
    os.replace(folder / f"{old_version}.json", folder / f"{new_version}.json")
    with pytest.raises(IntegrityError):
        store.load(pilot_class.id, new_version)


def test_stored_file_renamed_to_an_unpublished_hash_raises_integrity_error(
    pilot_class: TaskClass, tmp_path: Path
) -> None:
    store = RulesStore(tmp_path)
    version, _ = store.publish(pilot_class, published_at=T0)
    other = hashlib.sha256(b"some other rules").hexdigest()
    folder = tmp_path / pilot_class.id
    os.replace(folder / f"{version}.json", folder / f"{other}.json")
    with pytest.raises(IntegrityError):
        store.load(pilot_class.id, other)


def test_loading_an_unpublished_version_is_a_rule_error(
    pilot_class: TaskClass, tmp_path: Path
) -> None:
    with pytest.raises(RuleError, match="not published"):
        RulesStore(tmp_path).load(pilot_class.id, rules_version(pilot_class))


@pytest.mark.parametrize("bad", ["abc", "A" * 64, "../" + "0" * 61, "0" * 65])
def test_a_version_that_is_not_64_lower_hex_is_an_input_error(bad: str, tmp_path: Path) -> None:
    with pytest.raises(InputError):
        RulesStore(tmp_path).load("pilot_02_feedback_form", bad)


def test_corrupt_history_record_raises_integrity_error(
    pilot_class: TaskClass, tmp_path: Path
) -> None:
    store = RulesStore(tmp_path)
    store.publish(pilot_class, published_at=T0)
    history = tmp_path / pilot_class.id / "history.jsonl"
    history.write_text(history.read_text() + '{"version": "x"}\n', encoding="utf-8")
    with pytest.raises(IntegrityError):
        store.history(pilot_class.id)


# -- no retrospective change (spec 4.4, 10.5) ------------------------------------------------


def _change_p95_v1_value(data: dict[str, Any]) -> None:
    benchmark_of(data, "p95_latency_ms")["versions"][0]["value"] = "300"


def _change_p95_v2_justification(data: dict[str, Any]) -> None:
    benchmark_of(data, "p95_latency_ms")["versions"][1]["justification"] = "another reason"


def _drop_p95_v2(data: dict[str, Any]) -> None:
    benchmark_of(data, "p95_latency_ms")["versions"].pop()


@pytest.mark.parametrize(
    "change",
    [_change_p95_v1_value, _change_p95_v2_justification, _drop_p95_v2],
    ids=["value_of_v1", "justification_of_v2", "v2_removed"],
)
def test_changing_a_published_benchmark_version_is_refused_spec_4_4(
    change: Callable[[dict[str, Any]], None], delayed_class: TaskClass, tmp_path: Path
) -> None:
    store = RulesStore(tmp_path)
    version, _ = store.publish(delayed_class, published_at=T0)
    changed = variant(delayed_class, takes_effect(LATER, change))
    with pytest.raises(RuleError, match=r"spec 4\.4"):
        store.publish(changed, published_at=T0 + timedelta(days=1))
    # Nothing was written: the store still holds exactly the first version.
    assert [r["version"] for r in store.history(delayed_class.id)] == [version]
    assert not (tmp_path / delayed_class.id / f"{rules_version(changed)}.json").exists()
    problems = check_no_retrospective_change(delayed_class, changed, published_at=T0)
    assert problems
    assert all("spec 4.4" in p for p in problems)


@pytest.mark.parametrize(
    "published_at",
    [datetime(2027, 4, 1, tzinfo=UTC), datetime(2027, 3, 1, tzinfo=UTC)],
    ids=["after_effective_date", "at_effective_date"],
)
def test_new_benchmark_version_effective_before_publication_is_refused_spec_10_5(
    published_at: datetime, pilot_class: TaskClass, tmp_path: Path
) -> None:
    """A benchmark published after it takes effect would reach attempts already started."""
    store = RulesStore(tmp_path)
    store.publish(pilot_class, published_at=T0)
    changed = variant(pilot_class, add_delivery_v2("2027-03-01T00:00:00Z"))
    with pytest.raises(RuleError, match=r"spec 10\.5"):
        store.publish(changed, published_at=published_at)
    assert len(store.history(pilot_class.id)) == 1


def test_new_benchmark_version_effective_after_publication_is_accepted(
    pilot_class: TaskClass, tmp_path: Path
) -> None:
    store = RulesStore(tmp_path)
    old_version, _ = store.publish(pilot_class, published_at=T0)
    changed = variant(pilot_class, takes_effect("2027-03-01T00:00:00Z",
                                                add_delivery_v2("2027-03-01T00:00:00Z")))
    assert (
        check_no_retrospective_change(
            pilot_class, changed, published_at=datetime(2027, 2, 1, tzinfo=UTC)
        )
        == []
    )
    version, new = store.publish(changed, published_at=datetime(2027, 2, 1, tzinfo=UTC))
    assert new is True
    assert version == rules_version(changed) != old_version
    assert store.load(pilot_class.id, old_version) == pilot_class


def test_unchanged_class_has_no_retrospective_problems(delayed_class: TaskClass) -> None:
    later = datetime(2030, 1, 1, tzinfo=UTC)
    assert check_no_retrospective_change(delayed_class, delayed_class, published_at=later) == []
    assert (
        check_no_retrospective_change(
            delayed_class, variant(delayed_class, takes_effect("2030-02-01T00:00:00Z", retitle)),
            published_at=later,
        )
        == []
    )


def test_a_new_version_with_the_old_effective_date_is_refused_spec_10_5(
    delayed_class: TaskClass,
) -> None:
    """issue 10: a changed formula, threshold, cap or escrow share takes effect like a
    benchmark, only for attempts that start after it; the same date would reach running ones."""
    def halve_escrow(data: dict[str, Any]) -> None:
        data["confirmation"]["escrow_share"] = "0.25"

    problems = check_no_retrospective_change(
        delayed_class, variant(delayed_class, halve_escrow), published_at=T0
    )
    assert problems
    assert any("spec 10.5" in p for p in problems)


# -- pinning (spec 2.6, 10.5, 11.8) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("started_at", "p95_version", "p95_value"),
    [
        # The first day the class's current rules are in force (its benchmark dates from 11-01).
        (datetime(2026, 12, 4, 17, 15, tzinfo=UTC), 1, Decimal(250)),
        (datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC), 1, Decimal(250)),
        # 00:30 at UTC+1 is 23:30 UTC on the previous day: still version 1.
        (datetime(2027, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1))), 1, Decimal(250)),
        (datetime(2027, 1, 1, tzinfo=UTC), 2, Decimal(200)),
        (datetime(2026, 12, 31, 20, tzinfo=timezone(timedelta(hours=-5))), 2, Decimal(200)),
        (datetime(2030, 6, 1, tzinfo=UTC), 2, Decimal(200)),
    ],
    ids=[
        "first_day",
        "last_second_of_v1",
        "plus_one_before_v2",
        "v2_starts",
        "minus_five_in_v2",
        "long_after",
    ],
)
def test_pin_picks_the_benchmark_in_force_at_the_start(
    started_at: datetime, p95_version: int, p95_value: Decimal, delayed_class: TaskClass
) -> None:
    pinned = pin(delayed_class, started_at=started_at)
    assert pinned.benchmarks["p95_latency_ms"].version == p95_version
    assert pinned.benchmarks["p95_latency_ms"].value == p95_value
    assert {k: v.version for k, v in pinned.benchmarks.items() if k != "p95_latency_ms"} == {
        "reproduction_fixed": 1,
        "regression_suite": 1,
        "recurrence_free": 1,
    }
    assert pinned.version == rules_version(delayed_class)
    assert pinned.task_class is delayed_class


def test_pin_keeps_an_explicit_version(delayed_class: TaskClass) -> None:
    pinned = pin(delayed_class, started_at=datetime(2027, 1, 2, tzinfo=UTC), version="f" * 64)
    assert pinned.version == "f" * 64


def test_pinned_benchmarks_cannot_be_changed(delayed_class: TaskClass) -> None:
    pinned = pin(delayed_class, started_at=datetime(2027, 1, 2, tzinfo=UTC))
    with pytest.raises(TypeError):
        pinned.benchmarks["p95_latency_ms"] = pinned.benchmarks["recurrence_free"]  # type: ignore[index]


def test_pin_refuses_a_naive_start(delayed_class: TaskClass) -> None:
    with pytest.raises(InputError, match="timezone"):
        pin(delayed_class, started_at=datetime(2027, 1, 2))  # noqa: DTZ001


def test_pin_refuses_a_start_before_the_first_benchmark_spec_2_6(
    delayed_class: TaskClass,
) -> None:
    with pytest.raises(RuleError, match=r"spec 2\.6") as info:
        pin(delayed_class, started_at=datetime(2026, 10, 31, 23, 59, 59, tzinfo=UTC))
    assert "2026-11-01" in str(info.value)


# -- the bundled store -------------------------------------------------------------------------


def test_every_bundled_class_current_version_is_published_in_the_bundled_store() -> None:
    """Spec 4.1, 10.5: the shipped rules are published, so attempts can be pinned to them.

    FAILS until the lead publishes the bundled versions (``triz-eval catalogue publish``).
    """
    store = RulesStore(BUNDLED_STORE)
    missing = []
    for class_id, tc in sorted(load_catalogue().items()):
        version = rules_version(tc)
        try:
            assert store.load(class_id, version) == tc
        except RuleError:
            missing.append(f"{class_id}@{version}")
    assert missing == [], f"not published in {BUNDLED_STORE}: {missing}"
