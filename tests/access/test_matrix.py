"""The matrix file: strict validation and content-addressed versions (output 12.8; spec 9.2,
10.4, 10.7).  Every problem names the file, the line and the cell."""

from __future__ import annotations

import re

import pytest

from triz_ri_smart_ai_evaluator.access import (
    BUNDLED_MATRIX,
    AccessMatrixError,
    Action,
    Resource,
    Role,
    Scope,
    load_matrix,
    parse_matrix,
)
from triz_ri_smart_ai_evaluator.canonical import digest_of
from triz_ri_smart_ai_evaluator.rules import load_catalogue

TEXT = BUNDLED_MATRIX.read_text(encoding="utf-8")
FILE = "matrix.yaml"


def edited(role: str, resource: str, cell: str) -> str:
    """The bundled text with one cell's line replaced."""
    pattern = re.compile(rf"(  {role}:\n(?:    .*\n)*?)    {resource}: +\{{.*\}}\n")
    new, count = pattern.subn(lambda m: f"{m.group(1)}    {resource}: {cell}\n" if cell
                              else m.group(1), TEXT, count=1)
    assert count == 1
    return new


def test_bundled_matrix_loads_and_covers_every_cell() -> None:
    m = load_matrix()
    assert len(list(m.cells())) == len(Role) * len(Resource) * len(Action)
    assert m.version == digest_of(m.to_data())


def test_policy_defaults_are_those_of_9_2() -> None:
    m = load_matrix()
    granted = {(s, a) for r, s, a, ok in m.cells() if ok and r is Role.EVALUATED_POLICY}
    assert granted == {(Resource.TASK_SPEC_PUBLIC, Action.READ),
                       (Resource.SUBMISSIONS, Action.APPEND),
                       (Resource.ATTEMPTS, Action.READ)}
    assert m.cell(Role.EVALUATED_POLICY, Resource.ATTEMPTS).scope is Scope.OWN


def test_nobody_changes_or_deletes_anything() -> None:
    m = load_matrix()
    assert not [c for c in m.cells() if c[3] and c[2] in (Action.CHANGE, Action.DELETE)]


def test_auditor_reads_everything_and_writes_nothing() -> None:
    m = load_matrix()
    for resource in Resource:
        assert m.cell(Role.AUDITOR, resource).allow == {Action.READ}


def test_matrix_is_not_a_task_class_file() -> None:
    """The task-class loader globs catalogue/*.yaml; the matrix sits in catalogue/access/."""
    assert BUNDLED_MATRIX.parent.name == "access"
    assert load_catalogue()


@pytest.mark.parametrize(
    ("text", "cell", "message"),
    [
        pytest.param(edited("auditor", "quarantine", ""), "matrix.auditor.quarantine",
                     "cell missing", id="missing-cell"),
        pytest.param(edited("auditor", "quarantine", "{allow: [read]}\n    quarantine: "
                            "{allow: [read]}"), "matrix.auditor.quarantine", "duplicate cell",
                     id="duplicate"),
        pytest.param(edited("owner", "ledger", "{allow: [read, write]}"),
                     "matrix.owner.ledger.allow.1", "unknown action 'write'",
                     id="unknown-action"),
        pytest.param(edited("owner", "ledger", "{allow: [read, read]}"),
                     "matrix.owner.ledger.allow.1", "listed twice", id="repeated-action"),
        pytest.param(edited("owner", "ledger", "{}"), "matrix.owner.ledger", "allow is missing",
                     id="implicit-cell"),
        pytest.param(edited("owner", "ledger", "{allow: [read], scope: mine}"),
                     "matrix.owner.ledger.scope", "unknown scope", id="unknown-scope"),
        pytest.param(edited("owner", "ledger", "{allow: [read], note: x}"),
                     "matrix.owner.ledger.note", "unknown field", id="extra-field"),
        pytest.param(TEXT + "  superuser:\n    ledger: {allow: [read]}\n", "matrix.superuser",
                     "unknown role 'superuser'", id="unknown-role"),
        pytest.param(edited("owner", "ledger", "{allow: [read]}\n    secrets: {allow: []}"),
                     "matrix.owner.secrets", "unknown resource", id="unknown-resource"),
        pytest.param(TEXT.replace("triz-access-matrix/1", "triz-access-matrix/9"), "format",
                     "format must be", id="format"),
        pytest.param(edited("owner", "ledger", "{allow: [read, delete]}"),
                     "matrix.owner.ledger.allow", "spec 10.4", id="delete-granted"),
        pytest.param(edited("harness", "raw_measurements", "{allow: [read, append, change]}"),
                     "matrix.harness.raw_measurements.allow", "spec 10.4", id="change-granted"),
        pytest.param(edited("evaluated_policy", "raw_measurements", "{allow: [append]}"),
                     "matrix.evaluated_policy.raw_measurements.allow", "spec 9.2",
                     id="policy-writes-value"),
        pytest.param(edited("evaluated_policy", "check_schedule", "{allow: [read]}"),
                     "matrix.evaluated_policy.check_schedule.allow", "spec 9.2",
                     id="policy-sees-schedule"),
        pytest.param(edited("evaluated_policy", "attempts", "{allow: [read]}"),
                     "matrix.evaluated_policy.attempts.allow", "scope own",
                     id="policy-reads-all-attempts"),
        pytest.param(edited("auditor", "ledger", "{allow: [read, append]}"),
                     "matrix.auditor.ledger.allow", "never writes", id="auditor-writes"),
        pytest.param(edited("training_consumer", "control_sets", "{allow: [read]}"),
                     "matrix.training_consumer.control_sets.allow", "spec 9.6",
                     id="control-data-into-training"),
        pytest.param("format: [", "(yaml)", "malformed YAML", id="malformed-yaml"),
    ],
)
def test_invalid_matrix_names_file_and_cell(text: str, cell: str, message: str) -> None:
    with pytest.raises(AccessMatrixError) as error:
        parse_matrix(text, file=FILE)
    found = [p for p in error.value.problems if p.field == cell]
    assert found, [str(p) for p in error.value.problems]
    assert message in found[0].message
    assert str(found[0]).startswith(f"{FILE}:{found[0].line}: {cell}: ")
    assert FILE in error.value.diagnostics()


def test_version_changes_with_a_cell_not_with_a_comment() -> None:
    base = parse_matrix(TEXT, file=FILE).version
    assert parse_matrix("# another comment\n" + TEXT, file=FILE).version == base
    changed = parse_matrix(edited("owner", "ledger", "{allow: []}"), file=FILE)
    assert changed.version != base
    scoped = parse_matrix(edited("verifier", "attempts", "{allow: [read], scope: final}"),
                          file=FILE)
    assert scoped.version not in (base, changed.version)


def test_explicit_default_scope_is_the_same_content() -> None:
    same = parse_matrix(edited("owner", "ledger", "{allow: [read], scope: all}"), file=FILE)
    assert same.version == parse_matrix(TEXT, file=FILE).version


def test_unreadable_file(tmp_path: object) -> None:
    from pathlib import Path

    with pytest.raises(AccessMatrixError, match="cannot read"):
        load_matrix(Path(str(tmp_path)) / "nope.yaml")
