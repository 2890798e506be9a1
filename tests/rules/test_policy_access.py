"""One PolicyAccess vocabulary (issue 14 item 8): a task class declares only what the policy
cannot write to (spec 9.3); the provenance register records read and write as well (10.1)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.provenance.models import PolicyAccess as RegisterPolicyAccess
from triz_ri_smart_ai_evaluator.provenance.models import parse_enum
from triz_ri_smart_ai_evaluator.rules.indicators import (
    DECLARABLE_POLICY_ACCESS,
    REGISTERED_POLICY_ACCESS,
    PolicyAccess,
    TrustedSource,
)


def source(access: str) -> dict[str, Any]:
    return {"id": "receiver", "component": "a receiver", "kind": "receiver",
            "policy_access": access, "authentication": "signed", "independence": "separate"}


def test_the_register_and_the_catalogue_share_one_enum() -> None:
    assert RegisterPolicyAccess is PolicyAccess


@pytest.mark.parametrize("access", [m.value for m in DECLARABLE_POLICY_ACCESS])
def test_a_task_class_declares_access_the_policy_cannot_write_with(access: str) -> None:
    assert TrustedSource.model_validate(source(access)).policy_access == access


@pytest.mark.parametrize("access", ["write", "read", "admin"])
def test_a_task_class_cannot_declare_other_access_spec_9_3(access: str) -> None:
    with pytest.raises(ValidationError):
        TrustedSource.model_validate(source(access))


@pytest.mark.parametrize("access", ["read_public_part", "submit_artefact_only", "admin"])
def test_the_register_accepts_only_none_read_and_write(access: str) -> None:
    with pytest.raises(InputError, match="is not one of: none, read, write"):
        parse_enum(PolicyAccess, access, "policy access", InputError, REGISTERED_POLICY_ACCESS)


def test_the_schema_lists_only_what_a_task_class_may_declare() -> None:
    schema = TrustedSource.model_json_schema()
    assert schema["properties"]["policy_access"]["enum"] == [
        "none", "read_public_part", "submit_artefact_only"]
