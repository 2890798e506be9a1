"""W3C PROV export of the register (spec 9.15, 1.24): the echo chain of 9.16 made visible."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.provenance.conftest import ATTEMPT, INDEPENDENT_TEXT, POLICY_OUTPUT, World
from triz_ri_smart_ai_evaluator.provenance.prov_export import NAMESPACE, to_prov_document


def test_prov_document_records_sources_revisions_outputs_and_echoes(world: World) -> None:
    src = world.source("bank:feed/1")  # ':' and '/' must survive as one local name
    world.register.amend_source(replace(src, party="bank feed v2"), change="renamed")
    world.source("mirror")
    good = world.submit("bank:feed/1", INDEPENDENT_TEXT)
    echo = world.submit("mirror", POLICY_OUTPUT)

    doc = to_prov_document(world.register.state)
    data = json.loads(doc.serialize(format="json"))
    assert data["prefix"]["triz"] == NAMESPACE
    entities = data["entity"]
    revisions = [k for k in entities if k.startswith("triz:source/bank%3Afeed%2F1/")]
    assert sorted(revisions) == ["triz:source/bank%3Afeed%2F1/r1", "triz:source/bank%3Afeed%2F1/r2"]
    derivations = list(data["wasDerivedFrom"].values())
    by_type = {d["prov:type"]["$"]: d for d in derivations}
    assert sorted(by_type) == ["prov:Revision", "triz:echo"]
    revision = by_type["prov:Revision"]
    assert revision["prov:generatedEntity"].endswith("/r2")
    assert revision["prov:usedEntity"].endswith("/r1")
    assert entities[f"triz:confirmation/{good.receipt}"]["triz:status"] == "accepted"
    assert entities[f"triz:confirmation/{echo.receipt}"]["triz:reasons"] == "echo"
    # The echo derives from the policy output, which the attempt generated: 9.16's chain.
    derivation = by_type["triz:echo"]
    assert derivation["prov:generatedEntity"] == f"triz:confirmation/{echo.receipt}"
    assert derivation["prov:usedEntity"].startswith(f"triz:output/{ATTEMPT.replace('/', '%2F')}/")
    generated = {g["prov:entity"]: g["prov:activity"] for g in data["wasGeneratedBy"].values()}
    assert generated[derivation["prov:usedEntity"]] == "triz:attempt/task-7%2Fattempt-1"
    assert "triz:agent/evaluated-policy" in data["agent"]
    assert "wasDerivedFrom" in doc.get_provn()
