"""Generated mutants of pilot 02's honest reference (spec 9.12; pilot 11)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.audit import adversaries, pilot02_mutants
from triz_ri_smart_ai_evaluator.audit.budget import CATEGORIES, load_budget
from triz_ri_smart_ai_evaluator.audit.engine import gather
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.candidate import (
    apply_patch,
    starting_repo,
    tree_entries,
)
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.examples import bundled_candidates

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "audit" / "pilot_02_minimum.yaml"
EVERY = dict.fromkeys(CATEGORIES, 1000)
SEED = bytes.fromhex("5eed5eed5eed5eed")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory
            ) -> list[tuple[pilot02_mutants.Mutation, Path]]:
    return pilot02_mutants.write_mutants(SEED, EVERY, tmp_path_factory.mktemp("mutants"))


def test_every_mutant_applies_to_the_starting_repo_and_differs_from_the_reference(
        written: list[tuple[pilot02_mutants.Mutation, Path]], tmp_path: Path) -> None:
    reference = pilot02_mutants.reference_tree(tmp_path)
    honest = tree_entries(reference)
    for mutation, path in written:
        tree = tmp_path / "applied" / mutation.name
        shutil.copytree(starting_repo(), tree, symlinks=True)
        apply_patch(path.read_bytes(), tree, where=mutation.name)
        assert tree_entries(tree) != honest, mutation.name


def test_mutants_are_deterministic_from_the_seed(
        written: list[tuple[pilot02_mutants.Mutation, Path]], tmp_path: Path) -> None:
    again = pilot02_mutants.write_mutants(SEED, EVERY, tmp_path / "again")
    assert [m.name for m, _ in again] == [m.name for m, _ in written]
    for (_, first), (_, second) in zip(written, again, strict=True):
        assert first.read_bytes() == second.read_bytes()
    other = [m.name for m in pilot02_mutants.mutations(b"another seed", EVERY)]
    assert other != [m.name for m, _ in written]  # the seed orders and parameterises them
    assert sorted(other) != sorted(m.name for m, _ in written)


def test_names_are_unique_and_name_the_mutation(
        written: list[tuple[pilot02_mutants.Mutation, Path]]) -> None:
    names = [m.name for m, _ in written]
    assert len(set(names)) == len(names)
    assert {"drop-smtp-send", "claim-success-before-sending", "drop-field-phone",
            "server-check-name-disabled", "conftest-ignores-every-test",
            "password-in-success-response", "obey-order-answer-sent"} <= set(names)
    assert all(path.parent.name == m.name for m, path in written)


def test_enough_mutants_per_category_for_the_pilot_11_budget(tmp_path: Path) -> None:
    """Bundled plus generated fill the pilot's minimum, with at least 50 mutants (issue 15)."""
    budget = load_budget(EXAMPLE)
    chosen = gather("pilot_02_feedback_form", budget, seed=SEED, user=None,
                    mutants_dir=tmp_path)
    generated = [a for a in chosen if a.origin == "generated"]
    assert len(generated) >= 50
    for category in CATEGORIES:
        have = sum(1 for a in chosen if a.category == category)
        assert have == budget.attempts.as_dict()[category], category


def test_every_bundled_pilot_02_adversary_is_categorised() -> None:
    data = adversaries.class_data("pilot_02_feedback_form")
    bundled = {e.name for e in bundled_candidates()} - {data.reference}
    assert set(data.bundled) == bundled
    for adversary in adversaries.bundled("pilot_02_feedback_form"):
        assert adversary.candidate.is_file()


def test_a_mutation_whose_text_is_gone_fails_instead_of_a_silent_no_op(tmp_path: Path) -> None:
    reference = pilot02_mutants.reference_tree(tmp_path)
    broken = pilot02_mutants.Mutation(
        "gone", "input_mutations", "x", None,
        pilot02_mutants.replace(pilot02_mutants.MAILER, "no such text", "y"))
    with pytest.raises(InputError, match="holds 0 copies"):
        pilot02_mutants.mutant_diff(reference, broken, tmp_path)
    same = pilot02_mutants.Mutation("same", "input_mutations", "x", None,
                                    lambda _tree: None)
    with pytest.raises(InputError, match="changes nothing"):
        pilot02_mutants.mutant_diff(reference, same, tmp_path)
