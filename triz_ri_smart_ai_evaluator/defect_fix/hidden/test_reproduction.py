"""Hidden reproduction of DFX-1: orders on a tier boundary, drawn from the run's secret seed.

Kept outside the starting repository and never shown to the candidate; the harness copies it,
with the drawn ``cases.json``, into a copy of the candidate's tree inside the sandbox only.
"""

import json
from pathlib import Path

import pytest
from quote_service.pricing import parse_lines, quote

CASES = json.loads((Path(__file__).parent / "cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reproduction(case):
    assert quote(parse_lines(case["order"])).to_dict() == case["expected"]
