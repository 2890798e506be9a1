"""Shared fixtures of the gate tests: a brief, a real SQLite ledger, the model double."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.ledger.log import create_log_key, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.verifier.inputs import Brief

WORDING_59 = ("An inventory of information and other associated assets, including owners, "
              "shall be developed and maintained.")
BRIEF_DOC: dict[str, Any] = {
    "format": "triz-brief/1",
    "task": "One-page asset inventory policy outline for ISO/IEC 27001:2022 Annex A",
    "judgements": [
        {"id": "J1", "text": "The policy applies to all information assets, including cloud "
                             "services."},
        {"id": "J2", "text": "Asset owners review the inventory every six months."},
    ],
    "steps": [
        {"id": "S1", "title": "Scope and purpose",
         "content_spec": "State what the policy covers and why."},
        {"id": "S2", "title": "Inventory requirements",
         "content_spec": "State the inventory requirement with its citation."},
    ],
    "citations": [
        {"id": "C1", "citation": "ISO/IEC 27001:2022 Annex A 5.9", "wording": WORDING_59},
        {"id": "C2", "citation": "GDPR Article 32(1)(b)"},
    ],
    "evidence": [
        {"id": "E1", "url": "https://www.example.com/asset-tool/pricing",
         "prices": ["EUR 49.00"]},
    ],
}

CLEAN_S1 = ("This policy covers every information asset of the organisation, cloud services "
            "included, so that each asset has an owner.")
CLEAN_S2 = (f'ISO/IEC 27001:2022 Annex A 5.9 requires that "{WORDING_59}" Owners review the '
            "inventory every six months.")
# The live catch of seed 002: clauses 9.2 and 9.3 exist in the standard but not in the brief.
INVENTED_S2 = ("Asset owners keep the inventory current; the results feed the internal audit "
               "of clause 9.2 and the management review of clause 9.3 of ISO/IEC 27001:2022.")


def verdict(passed: bool, *issues: tuple[str, str, str]) -> str:
    """A verdict as the model would write it: (kind, quote, explanation) per issue."""
    return json.dumps({"pass": passed, "issues": [
        {"kind": k, "quote": q, "explanation": e} for k, q, e in issues]})


PASS = verdict(True)


@pytest.fixture
def brief() -> Brief:
    return Brief.model_validate(BRIEF_DOC)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SqliteStore]:
    keys = tmp_path / "keys"
    create_log_key(keys)
    store = open_sqlite_ledger(tmp_path / "ledger.db", keys)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def write_brief(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    def write(doc: dict[str, Any]) -> Path:
        path = tmp_path / "brief.json"
        path.write_text(json.dumps(doc), "utf-8")
        return path

    return write
