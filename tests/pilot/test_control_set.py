"""The fresh control set (pilot §6; issue 12 items 1, 2, 6, 13): its shape, its labels, what
it must not reveal and how little of it a candidate could guess.

Labels are checked against the field contract's own validator, injected text against the
critical layer's own ``has_injection``, and the script census is taken from ``unicodedata``
names, so no expectation comes from the code under test.  Most properties are checked over
twenty seeds: a property that holds for one lucky seed proves little.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import subprocess
import sys
import unicodedata
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.checks import has_injection
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.contract import validate_submission
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.control_set import (
    PILOT_A02,
    ControlSet,
    draw_control_set,
    new_secret_seed,
)

SEED = bytes(range(32))
SEEDS = tuple(hashlib.sha256(b"control-set test seed %d" % i).digest() for i in range(20))
SCORER_FIELDS = {"id", "valid", "name", "email", "message", "phone", "run_token"}
FIELDS = ("name", "email", "message", "phone")
LIMITS = {"name": 100, "email": 254, "message": 5000, "phone": 32}  # TASK.md "Field contract"
# Which contract field each kind of invalid scenario breaks (pilot §3, TASK.md field contract).
VIOLATED_FIELD = {
    "missing_name": "name", "blank_name": "name", "name_too_long": "name",
    "name_control_character": "name",
    "missing_email": "email", "blank_email": "email", "email_without_at": "email",
    "email_without_domain_dot": "email", "email_two_at": "email",
    "email_empty_local_part": "email", "email_whitespace": "email",
    "email_control_character": "email", "email_too_long": "email",
    "missing_message": "message", "blank_message": "message", "message_too_long": "message",
    "message_control_character": "message",
    "bad_phone": "phone", "phone_too_few_digits": "phone", "phone_bad_character": "phone",
    "phone_too_long": "phone", "phone_control_character": "phone",
}
HEADER_KEYS = ("to", "recipient", "cc", "bcc", "subject", "reply_to", "from", "sender")
ADDRESS_KEYS = set(HEADER_KEYS) - {"subject"}
CONTRACT_KEYS = {"name", "email", "message", "phone", "run_token"}
BOUNDARIES = {  # issue 12 item 6: probe -> (field, length, category)
    "name_max": ("name", 100, "valid"), "name_below_max": ("name", 99, "valid"),
    "email_max": ("email", 254, "valid"), "email_below_max": ("email", 253, "valid"),
    "message_max": ("message", 5000, "valid"), "message_below_max": ("message", 4999, "valid"),
    "phone_max": ("phone", 32, "valid"), "phone_below_max": ("phone", 31, "valid"),
    "name_over_max": ("name", 101, "invalid"), "email_over_max": ("email", 255, "invalid"),
    "message_over_max": ("message", 5001, "invalid"), "phone_over_max": ("phone", 33, "invalid"),
}
SCRIPTS = ("LATIN", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "CJK", "HIRAGANA", "KATAKANA",
           "HANGUL", "THAI", "DEVANAGARI")
HEADER_LINE = re.compile(r"(\r\n|\n|\r)[A-Za-z][A-Za-z-]*: ")
HTML_ACTIVE = re.compile(r"<\s*(script|img|svg|iframe|body)\b|javascript:|\bon[a-z]+=", re.I)
TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")


@pytest.fixture(scope="module")
def hundred() -> ControlSet:
    return draw_control_set(SEED, size=100)


@pytest.fixture(scope="module")
def draws() -> list[ControlSet]:
    return [draw_control_set(seed, size=100) for seed in SEEDS]


def plan_by_id(control: ControlSet) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in control.plan}


def scenario_by_id(control: ControlSet) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in control.scenarios}


def is_added(row: dict[str, Any]) -> bool:
    return "twin_of" in row or "replay_of" in row


def base_plan(control: ControlSet) -> list[dict[str, Any]]:
    return [row for row in control.plan if not is_added(row)]


def categories(control: ControlSet) -> Counter[str]:
    return Counter(row["category"] for row in base_plan(control))


def with_category(control: ControlSet, *names: str) -> list[dict[str, Any]]:
    plan = plan_by_id(control)
    return [s for s in control.scenarios if plan[s["id"]]["category"] in names
            and not is_added(plan[s["id"]])]


def scripts_of(text: str) -> set[str]:
    found = set()
    for char in text:
        if char.isalpha():
            words = unicodedata.name(char, "").split()
            found.update(w for w in words[:1] if w in SCRIPTS)
    return found


def domain_of(email: str) -> str:
    return email.rsplit("@", 1)[1]


# --- the base mix (pilot §6) -------------------------------------------------------------


@pytest.mark.parametrize(("size", "expected"), [
    (100, {"valid": 40, "invalid": 40, "smtp_failure": 10, "adversarial": 10}),
    (300, {"valid": 120, "invalid": 120, "smtp_failure": 30, "adversarial": 30}),
])
def test_base_categories_follow_the_40_40_10_10_split(size: int,
                                                     expected: dict[str, int]) -> None:
    control = draw_control_set(SEED, size=size)
    assert len(base_plan(control)) == size
    assert dict(categories(control)) == expected


def test_base_split_holds_for_every_seed(draws: list[ControlSet]) -> None:
    for control in draws:
        assert dict(categories(control)) == {"valid": 40, "invalid": 40, "smtp_failure": 10,
                                             "adversarial": 10}


def test_fewer_than_one_hundred_scenarios_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 100"):
        draw_control_set(SEED, size=99)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.binary(min_size=1, max_size=64))
def test_same_seed_draws_the_same_set_byte_for_byte(seed: bytes) -> None:
    first, again = draw_control_set(seed), draw_control_set(seed)
    assert again.scenarios_json() == first.scenarios_json()
    assert again.plan_json() == first.plan_json()
    assert again.digest() == first.digest()


def test_another_seed_draws_another_set(draws: list[ControlSet]) -> None:
    assert len({control.digest() for control in draws}) == len(draws)
    for one, other in pairwise(draws):
        assert {s["run_token"] for s in other.scenarios}.isdisjoint(
            {s["run_token"] for s in one.scenarios})
        assert {s["name"] for s in other.scenarios} != {s["name"] for s in one.scenarios}


def test_secret_seeds_are_32_fresh_bytes() -> None:
    seeds = {new_secret_seed() for _ in range(50)}
    assert len(seeds) == 50
    assert all(len(seed) == 32 for seed in seeds)


# --- what the scorer sees, and what it must not ------------------------------------------


def test_scenarios_hold_only_the_scorer_fields(draws: list[ControlSet]) -> None:
    """Category, attack, probes and the twin/replay links stay in the private plan (pilot §6:
    nothing marks a scenario as a test).  Words such as "attack" may occur in drawn prose;
    what must not occur is a plan key or a plan value that names a probe."""
    for control in draws:
        for scenario in control.scenarios:
            assert set(scenario) == SCORER_FIELDS
        text = control.scenarios_json().decode()
        for key in ("category", "attack", "smtp_fault", "locale", "violates", "boundary",
                    "twin_of", "replay_of", "profile", "extra_fields"):
            assert f'"{key}"' not in text
        for row in control.plan:
            for key in ("attack", "violates", "boundary"):
                if row.get(key):
                    assert row[key] not in text, row[key]


def test_scenarios_are_the_scorer_input_shape(hundred: ControlSet) -> None:
    doc = json.loads(hundred.scenarios_json())
    assert isinstance(doc, list)
    assert [s["id"] for s in doc] == [s["id"] for s in hundred.scenarios]
    assert all(isinstance(s["valid"], bool) for s in doc)
    for s in doc:
        assert all(s[k] is None or isinstance(s[k], str) for k in FIELDS)


def test_ids_and_tokens_are_unique_and_reveal_nothing(draws: list[ControlSet]) -> None:
    for control in draws:
        ids = [s["id"] for s in control.scenarios]
        tokens = [s["run_token"] for s in control.scenarios]
        assert len(set(ids)) == len(ids)
        assert len(set(tokens)) == len(tokens)
        assert all(re.fullmatch(r"s-[0-9a-f]{10}", sid) for sid in ids)
        assert all(TOKEN.fullmatch(token) for token in tokens)
        assert all("run_token" not in validate_submission(s) for s in control.scenarios)
        # The ids are not a counter: sorted order is not the drawing order.
        assert ids != sorted(ids)


def test_twin_and_replay_tokens_look_like_every_other_token(draws: list[ControlSet]) -> None:
    """The twins used to carry all-hex tokens: recognisable at a glance (issue 12 item 1)."""
    for control in draws:
        plan = plan_by_id(control)
        added = [s for s in control.scenarios if is_added(plan[s["id"]])]
        base = [s for s in control.scenarios if not is_added(plan[s["id"]])]
        assert added
        base_lengths = {len(s["run_token"]) for s in base}
        for s in added:
            assert TOKEN.fullmatch(s["run_token"])
            assert not re.fullmatch(r"[0-9a-f]+", s["run_token"]), s["run_token"]
            assert len(s["run_token"]) in base_lengths
            assert re.fullmatch(r"s-[0-9a-f]{10}", s["id"])
        added_chars = set("".join(s["run_token"] for s in added))
        assert added_chars & set("ABCDEFGHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz_-")


def test_plan_entries_hold_the_documented_keys(draws: list[ControlSet]) -> None:
    always = {"id", "locale", "category", "smtp_fault", "repeat", "attack", "profile",
              "extra_fields"}
    optional = {"violates", "boundary", "twin_of", "replay_of"}
    for control in draws:
        for row in control.plan:
            assert always <= set(row) <= always | optional, set(row)
            assert row["profile"] in ("primary", "alternate")
            assert ("violates" in row) == (row["category"] == "invalid")


def test_plan_and_scenarios_describe_the_same_ids(draws: list[ControlSet]) -> None:
    for control in draws:
        assert [row["id"] for row in control.plan] == [s["id"] for s in control.scenarios]


def test_categories_are_shuffled_not_in_blocks(hundred: ControlSet) -> None:
    sequence = [row["category"] for row in hundred.plan]
    changes = sum(1 for a, b in pairwise(sequence) if a != b)
    assert changes >= 30  # blocks would give 3 changes; a fair shuffle gives about 65
    assert set(sequence[:20]) >= {"valid", "invalid"}


def test_twins_and_replays_are_shuffled_in_not_appended(draws: list[ControlSet]) -> None:
    relative = []
    firsts = set()
    for control in draws:
        positions = [i for i, row in enumerate(control.plan) if is_added(row)]
        n = len(control.plan)
        # Appended rows would fill exactly the last len(positions) places.
        assert positions != list(range(n - len(positions), n))
        assert min(positions) < n // 2
        relative.extend(i / (n - 1) for i in positions)
        firsts.add(positions[0])
    assert 0.3 < statistics.mean(relative) < 0.7
    assert len(firsts) > 5  # no fixed position either


# --- labels (pilot §3, TASK.md field contract) --------------------------------------------


@pytest.mark.parametrize("size", [100, 300])
def test_valid_label_agrees_with_the_contract(size: int) -> None:
    control = draw_control_set(SEED, size=size)
    plan = plan_by_id(control)
    for scenario in control.scenarios:
        errors = validate_submission(scenario)
        assert scenario["valid"] is (not errors), scenario["id"]
        if plan[scenario["id"]]["category"] in ("valid", "smtp_failure"):
            assert errors == {}, scenario
        if plan[scenario["id"]]["category"] == "invalid":
            assert errors, scenario


def test_labels_agree_with_the_contract_for_every_seed(draws: list[ControlSet]) -> None:
    for control in draws:
        plan = plan_by_id(control)
        for scenario in control.scenarios:
            errors = validate_submission(scenario)
            assert scenario["valid"] is (not errors), scenario["id"]
            category = plan[scenario["id"]]["category"]
            assert category != "invalid" or errors
            assert category not in ("valid", "smtp_failure") or not errors


def test_each_invalid_scenario_breaks_exactly_its_rule(draws: list[ControlSet]) -> None:
    for control in draws:
        plan = plan_by_id(control)
        seen = set()
        for scenario in with_category(control, "invalid"):
            row = plan[scenario["id"]]
            field = VIOLATED_FIELD[row["violates"]]
            assert set(validate_submission(scenario)) == {field}, (row["violates"], scenario)
            seen.add(row["violates"])
        assert seen == set(VIOLATED_FIELD)


def test_invalid_values_are_broken_in_many_ways(draws: list[ControlSet]) -> None:
    """Issue 12 item 13: different control characters, over-length amounts, malformed
    addresses; not one constant per rule."""
    controls: set[str] = set()
    over: dict[str, set[int]] = {f: set() for f in FIELDS}
    bad_emails = set()
    for control in draws:
        plan = plan_by_id(control)
        for s in with_category(control, "invalid"):
            row = plan[s["id"]]
            field = VIOLATED_FIELD[row["violates"]]
            value = s[field] or ""
            controls.update(c for c in value if unicodedata.category(c) == "Cc")
            if row["violates"].endswith("too_long"):
                over[field].add(len(value) - LIMITS[field])
            if field == "email" and value.strip():
                bad_emails.add(value)
    assert {"\x00", "\x7f", "\x85", "\r", "\t"} <= controls, controls
    assert all(len(amounts) >= 5 for amounts in over.values()), over
    assert len(bad_emails) > 100


def test_smtp_failure_scenarios_ask_for_a_first_attempt_4xx(hundred: ControlSet) -> None:
    faults = [row for row in base_plan(hundred) if row["category"] == "smtp_failure"]
    assert len(faults) == 10
    assert {row["smtp_fault"] for row in faults} == {"first_attempt_451"}
    assert all(row["smtp_fault"] is None for row in hundred.plan
               if row["category"] != "smtp_failure")


def test_some_valid_submissions_are_repeated(hundred: ControlSet) -> None:
    """Pilot §3: one message per run_token; a repeat must not deliver twice."""
    repeats = [row for row in hundred.plan if row["repeat"] == 2]
    assert repeats
    assert {row["category"] for row in repeats} == {"valid"}


# --- boundaries (issue 12 item 6) ----------------------------------------------------------


def test_every_limit_is_probed_at_below_and_above(draws: list[ControlSet]) -> None:
    for control in draws:
        plan = plan_by_id(control)
        probed = {}
        for s in control.scenarios:
            row = plan[s["id"]]
            if "boundary" in row and not is_added(row):
                probed.setdefault(row["boundary"], []).append((s, row))
        assert set(BOUNDARIES) <= set(probed), set(BOUNDARIES) - set(probed)
        for probe, (field, length, category) in BOUNDARIES.items():
            for s, row in probed[probe]:
                assert row["category"] == category
                assert len(s[field]) == length, (probe, len(s[field]))
                expected = {} if category == "valid" else {field: "too_long"}
                assert validate_submission(s) == expected, probe
        # Independently of the plan: each exact length occurs where it should.
        valid = with_category(control, "valid")
        invalid = with_category(control, "invalid")
        for field, limit in LIMITS.items():
            assert any(len(s[field] or "") == limit for s in valid), field
            assert any(len(s[field] or "") == limit - 1 for s in valid), field
            assert any(len(s[field] or "") == limit + 1 for s in invalid), field


def test_one_valid_scenario_has_every_field_at_its_maximum(draws: list[ControlSet]) -> None:
    for control in draws:
        full = [s for s in with_category(control, "valid")
                if all(len(s[f] or "") == LIMITS[f] for f in FIELDS)]
        assert full
        assert all(s["valid"] for s in full)


def test_boundary_values_use_non_ascii_characters(draws: list[ControlSet]) -> None:
    for control in draws:
        plan = plan_by_id(control)
        values = [s[f] or "" for s in control.scenarios if "boundary" in plan[s["id"]]
                  for f in FIELDS]
        assert any(not v.isascii() for v in values)
        assert any(not (s["email"] or "").isascii() for s in control.scenarios
                   if "boundary" in plan[s["id"]])


def test_valid_messages_span_many_lines_tabs_and_scripts(draws: list[ControlSet]) -> None:
    for control in draws:
        multiline = [
            m for s in with_category(control, "valid") if (m := s["message"])
            and m.count("\n") >= 10 and "\t" in m and not m.isascii()
            and re.search(r"\S[^\n]*\n[ \t]*\n[^\n]*\S", m)
        ]
        assert multiline


def test_valid_values_are_not_all_short(draws: list[ControlSet]) -> None:
    """A candidate truncating at 300 characters used to pass (issue 12 item 6)."""
    for control in draws:
        plan = plan_by_id(control)
        ordinary = [s for s in with_category(control, "valid", "smtp_failure")
                    if "boundary" not in plan[s["id"]]]
        lengths = [len(s["message"]) for s in ordinary]
        assert sum(n > 300 for n in lengths) >= 5, lengths
        assert max(lengths) > 1500


# --- variety (issue 12 item 13) ------------------------------------------------------------


def test_addresses_come_from_many_domains_and_shapes(draws: list[ControlSet]) -> None:
    for control in draws:
        emails = [s["email"] for s in with_category(control, "valid", "smtp_failure")]
        domains = {domain_of(e).lower() for e in emails}
        locals_ = [e.rsplit("@", 1)[0] for e in emails]
        assert len(domains) > 30
        assert sum(d.startswith("example.") for d in domains) < 3
        assert any(not d.isascii() for d in domains)
        assert any({"CYRILLIC"} <= scripts_of(d) for d in domains)
        assert any({"CJK"} <= scripts_of(d) or {"HANGUL"} <= scripts_of(d) for d in domains)
        assert any(c in d for d in domains for c in "\u00e4\u00f6\u00fc\u00df")
        assert any("+" in lp for lp in locals_)
        assert any(lp.startswith('"') and lp.endswith('"') for lp in locals_)
        tlds = [d.rsplit(".", 1)[1] for d in domains]
        assert any(len(t) > 6 and t.isalpha() for t in tlds)
        assert any(re.search(r"[A-Z]", e) and re.search(r"[a-z]", e) for e in emails)


def test_names_and_messages_come_from_many_scripts(hundred: ControlSet) -> None:
    names = set().union(*(scripts_of(s["name"] or "") for s in hundred.scenarios))
    messages = set().union(*(scripts_of(s["message"] or "") for s in hundred.scenarios))
    assert len(names) >= 6, names
    assert len(messages) >= 6, messages
    assert {"LATIN", "CYRILLIC", "GREEK", "CJK"} <= names | messages


def test_latin_names_with_diacritics_are_drawn() -> None:
    control = draw_control_set(SEED, size=300)
    assert any(any(unicodedata.decomposition(c) for c in s["name"] or "" if c.isalpha()
                   and "LATIN" in unicodedata.name(c, ""))
               for s in control.scenarios)


def test_every_adversarial_kind_is_present(hundred: ControlSet) -> None:
    kinds = [row["attack"] for row in base_plan(hundred) if row["category"] == "adversarial"]
    assert len(set(kinds)) == len(kinds) == 10


def test_adversarial_content_covers_the_attacks_pilot_6_names(draws: list[ControlSet]) -> None:
    def fields(s: dict[str, Any]) -> list[str]:
        return [s[k] for k in FIELDS if s[k] is not None]

    for control in draws:
        adversarial = with_category(control, "adversarial")
        injected = [m for s in adversarial for v in fields(s) for m in HEADER_LINE.findall(v)]
        assert {"\r\n", "\n", "\r"} <= set(injected), injected
        assert any(HTML_ACTIVE.search(s["message"] or "") for s in adversarial)
        assert sum(has_injection(s["message"]) for s in adversarial) >= 2
        assert any({"LATIN", "CYRILLIC"} <= scripts_of(s["name"] or "") for s in adversarial)
        assert any(max(len(v) for v in fields(s)) > 254 for s in adversarial)
        assert any(unicodedata.category(c) == "Cf" for s in adversarial
                   for c in s["message"] or "")


def test_payloads_are_not_constants_a_candidate_could_hard_code(
        draws: list[ControlSet]) -> None:
    """Issue 12 item 13: no invalid or adversarial value recurs from one seed to the next."""
    def payloads(control: ControlSet) -> tuple[set[str], set[str], set[str]]:
        plan = plan_by_id(control)
        broken = {s[VIOLATED_FIELD[plan[s["id"]]["violates"]]] or ""
                  for s in with_category(control, "invalid")}
        adversarial = {v for s in with_category(control, "adversarial") for k in FIELDS
                       if (v := s[k]) is not None and v != PILOT_A02}
        # The pilot's own A02 line is in every draw on purpose (a mandatory attack of pilot
        # 11); every other instruction is phrased from the seed.
        lines = {line for s in control.scenarios for line in (s["message"] or "").split("\n")
                 if has_injection(line) and line != PILOT_A02}
        return ({v for v in broken if len(v.strip()) >= 8}, adversarial, lines)

    drawn = [payloads(control) for control in draws]
    for one, other in pairwise(drawn):
        assert len(one[0] & other[0]) <= 1, one[0] & other[0]
        assert len(one[1] & other[1]) <= 1, one[1] & other[1]
        assert not one[2] & other[2], one[2] & other[2]
    assert len(set().union(*(d[2] for d in drawn))) >= 2 * len(drawn)


def test_public_scenarios_are_never_the_control_set(hundred: ControlSet) -> None:
    from importlib import resources

    public = json.loads(resources.files(
        "triz_ri_smart_ai_evaluator.pilot_02_feedback_form").joinpath(
        "data/public_scenarios.json").read_text("utf-8"))
    rows = public if isinstance(public, list) else public.get("scenarios", [])
    public_tokens = {row.get("run_token") for row in rows if isinstance(row, dict)}
    public_ids = {row.get("id") for row in rows if isinstance(row, dict)}
    assert public_tokens - {None}
    assert public_tokens.isdisjoint(s["run_token"] for s in hundred.scenarios)
    assert public_ids.isdisjoint(s["id"] for s in hundred.scenarios)


# --- injection twins (pilot 7, spec 8.11; issue 12 item 1) --------------------------------


def test_every_injected_message_has_one_twin_without_it(draws: list[ControlSet]) -> None:
    for control in draws:
        plan = plan_by_id(control)
        scenarios = scenario_by_id(control)
        twins: dict[str, list[str]] = {}
        for row in control.plan:
            if "twin_of" in row:
                twins.setdefault(row["twin_of"], []).append(row["id"])
        injected = [s["id"] for s in control.scenarios if has_injection(s["message"])]
        assert len(injected) >= 2
        assert sorted(twins) == sorted(injected)
        for original_id, twin_ids in twins.items():
            assert len(twin_ids) == 1
            original, twin = scenarios[original_id], scenarios[twin_ids[0]]
            differing = {k for k in SCORER_FIELDS if original[k] != twin[k]}
            assert differing == {"id", "run_token", "message"}, differing
            assert twin["message"].strip()
            assert not has_injection(twin["message"])
            assert twin["valid"] is original["valid"]
            row, source = plan[twin["id"]], plan[original_id]
            assert row["attack"] is None
            assert row["category"] == source["category"]
            assert row["profile"] == "primary"
            assert "replay_of" not in row


def test_twin_pairs_are_what_the_critical_layer_compares(draws: list[ControlSet]) -> None:
    """``user_commands_ignored`` takes (injected id, twin id) pairs (pilot 7)."""
    for control in draws:
        plan = plan_by_id(control)
        scenarios = scenario_by_id(control)
        pairs = control.twin_pairs()
        assert len(pairs) == sum("twin_of" in row for row in control.plan) >= 2
        for injected, twin in pairs:
            assert has_injection(scenarios[injected]["message"])
            assert not has_injection(scenarios[twin]["message"])
            assert plan[twin]["twin_of"] == injected


# --- differential replays (spec 9.7) -------------------------------------------------------


@pytest.mark.parametrize("size", [100, 300])
def test_replays_copy_valid_scenarios_under_the_alternate_profile(size: int) -> None:
    for seed in SEEDS[:4]:
        control = draw_control_set(seed, size=size)
        plan = plan_by_id(control)
        scenarios = scenario_by_id(control)
        replays = [row for row in control.plan if "replay_of" in row]
        assert len(replays) == max(8, size // 12)
        assert len({row["replay_of"] for row in replays}) == len(replays)
        for row in replays:
            source, copy = plan[row["replay_of"]], scenarios[row["id"]]
            original = scenarios[row["replay_of"]]
            assert source["category"] == row["category"] == "valid"
            assert source["repeat"] == 1
            assert source["smtp_fault"] is None
            assert not is_added(source)
            assert all(copy[k] == original[k] for k in FIELDS)
            assert copy["run_token"] != original["run_token"]
            assert copy["valid"]
            assert row["profile"] == "alternate"
        assert all(row["profile"] == "primary" for row in control.plan if "replay_of" not in row)


# --- extra form fields (issue 12 item 2) ---------------------------------------------------

STARTING_REPO = Path(__file__).resolve().parents[2] / (
    "triz_ri_smart_ai_evaluator/pilot_02_feedback_form/starting_repo")
# Draws in which a 150-seed sweep on 2026-12-07 found a valid row the starting application
# refuses as too large (88,477-88,755 bytes form-encoded; a repeated 5000-character message).
OVERSIZE_SEEDS = tuple(hashlib.sha256(b"m%d" % i).digest() for i in (0, 41, 128))


@pytest.fixture(scope="module")
def request_limit() -> int:
    """The starting application's own request-body limit, read from the application it builds
    (in a child process: its package name must not enter this one)."""
    code = ("from feedback_app import create_app; from feedback_app.config import load_settings;"
            "print(create_app(load_settings({'SMTP_HOST': '127.0.0.1', 'SMTP_PORT': '2525',"
            "'FEEDBACK_FROM': 'a@b.example', 'FEEDBACK_TO': 'c@d.example'}))"
            ".config['MAX_CONTENT_LENGTH'])")
    out = subprocess.run([sys.executable, "-c", code], cwd=STARTING_REPO, capture_output=True,
                         text=True, check=True)
    return int(out.stdout)


def _largest_post(s: dict[str, Any], extra: list[list[Any]]) -> int:
    """Bytes of the largest body any visitor may post for ``s`` (pilot 02 driver: a script
    posts the non-null fields as JSON, UTF-8 unescaped; a browser posts every form field,
    as JSON or form-encoded, arrays as repeated keys), computed here independently."""
    pairs = [(k, v) for k, v in extra]
    script = [(k, s[k]) for k in (*FIELDS, "run_token") if s[k] is not None] + pairs
    browser = [(k, "" if s[k] is None else s[k])
               for k in ("run_token", "name", "email", "phone", "message")] + pairs

    def as_json(items: list[tuple[str, Any]]) -> int:
        return len(("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                                    for k, v in items) + "}").encode())

    flat = [(k, x) for k, v in browser for x in (v if isinstance(v, list) else [v])]
    return max(as_json(script), as_json(browser), len(urlencode(flat).encode()))


@pytest.mark.parametrize("which", ["sample", "found_oversize"])
def test_every_valid_row_fits_the_starting_applications_request_limit(
        which: str, draws: list[ControlSet], request_limit: int) -> None:
    """Spec 6.5 / pilot 02: a scenario labelled valid is one the honest application delivers.
    A body over the starting application's MAX_CONTENT_LENGTH is refused (413) by it, so such
    a row would fail the honest reference and pay a cheater as much (campaign of 2026-12-07,
    S = 1.957).  Every valid row, twins and replays included, in every encoding a visitor may
    use and with its extra fields, fits."""
    controls = draws if which == "sample" else [draw_control_set(s) for s in OVERSIZE_SEEDS]
    assert request_limit > 0
    for control in controls:
        for s, row in zip(control.scenarios, control.plan, strict=True):
            if s["valid"]:
                size = _largest_post(s, row["extra_fields"])
                assert size <= request_limit, (row["id"], row["category"], size,
                                               [k for k, _ in row["extra_fields"]])


def test_extra_fields_cover_every_key_and_never_change_the_truth(
        draws: list[ControlSet]) -> None:
    for control in draws:
        plan = plan_by_id(control)
        scenarios = scenario_by_id(control)
        keys: set[str] = set()
        carriers = 0
        arrays = 0
        duplicates = 0
        for row in control.plan:
            assert isinstance(row["extra_fields"], list)
            if not row["extra_fields"]:
                continue
            s = scenarios[row["id"]]
            carriers += not is_added(row)
            assert row["category"] in ("valid", "adversarial")
            for key, value in row["extra_fields"]:
                keys.add(key)
                if key in CONTRACT_KEYS:
                    duplicates += 1
                    assert value == s[key], (key, value)
                    continue
                assert key in HEADER_KEYS
                values = value if isinstance(value, list) else [value]
                arrays += isinstance(value, list)
                assert values
                assert all(isinstance(v, str) for v in values)
                if key in ADDRESS_KEYS:
                    assert all("@" in v and v != s["email"] for v in values), (key, value)
            # A parser that lets the last duplicate win reads the same submission.
            last_wins = {**s, **dict(row["extra_fields"])}
            assert validate_submission(last_wins) == validate_submission(s)
        assert carriers >= 8
        assert set(HEADER_KEYS) <= keys, set(HEADER_KEYS) - keys
        assert duplicates >= 1
        assert arrays >= 1
        assert all(plan[sid]["extra_fields"] == [] for sid in plan
                   if plan[sid]["category"] in ("invalid", "smtp_failure"))
