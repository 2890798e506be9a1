"""Issue 11 item 5: rotating or revoking a trusted principal's key, through the command.

Before the fix, a changed key in service.yaml made ``triz-eval serve`` exit 2 (``source
'verifier-1' is at revision 1, not 2``).  Now ``triz-eval service rotate-key`` writes the new
private key (0600), records the new revision in the register and the configuration; the service
starts, the new key works and the old one is refused.  ``revoke-key`` refuses the principal.
"""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.service.test_hostile_replay import TRIZ_EVAL, serving
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.ledger.events import parse_body
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.service.client import PolicyClient, ServiceError, TrustedClient
from triz_ri_smart_ai_evaluator.service.config import init_service_dir, load_principal_key

CLASS = "document_step_faithfulness"


def triz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRIZ_EVAL, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def decide(url: str, folder: Path, key_file: Path, token: str) -> dict[str, object]:
    with PolicyClient(url, token) as policy:
        attempt = policy.submit(CLASS, b"artefact", claims=["done"])
    key = load_principal_key(key_file)
    with TrustedClient(url, "verifier-1", Role.VERIFIER, key) as verifier:
        return verifier.request("verifier_decisions", "append",
                                {"attempt_id": attempt, "decision": {"verdict": "verified"}})


def test_rotate_key_then_the_service_starts_and_only_the_new_key_works(tmp_path: Path) -> None:
    folder = tmp_path / "svc"
    init_service_dir(folder)
    token = json.loads((folder / "credentials.json").read_text())["policy_tokens"]["policy-1"]
    key_file = folder / "principals" / "verifier-1.key"
    old = tmp_path / "old.key"
    old.write_bytes(key_file.read_bytes())
    with serving(folder) as url:
        decide(url, folder, key_file, token)

    rotated = triz("service", "rotate-key", "--config", str(folder / "service.yaml"),
                   "--principal", "verifier-1")
    assert rotated.returncode == 0, rotated.stderr
    assert key_file.read_bytes() != old.read_bytes()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    doc = yaml.safe_load((folder / "service.yaml").read_text())
    entry = next(t for t in doc["trusted"] if t["id"] == "verifier-1")
    assert entry["public_key"] in rotated.stdout

    with serving(folder) as url:  # exited 2 before the fix
        assert decide(url, folder, key_file, token)["seq"]
        with pytest.raises(ServiceError) as refused:
            decide(url, folder, old, token)
        assert refused.value.status == 401
    store = SqliteStore.open(folder / "ledger.db", read_only=True)
    amended = [e for e in (parse_body(b, seq=s) for s, b in store.scan())
               if e["kind"] == "source.amended" and e["data"]["source"]["id"] == "verifier-1"]
    store.close()
    assert [e["data"]["source"]["revision"] for e in amended] == [2]


def test_a_key_changed_by_hand_in_the_config_is_an_amendment_not_an_exit(tmp_path: Path) -> None:
    folder = tmp_path / "svc"
    init_service_dir(folder)
    with serving(folder):
        pass
    doc = yaml.safe_load((folder / "service.yaml").read_text())
    verifier = next(t for t in doc["trusted"] if t["id"] == "verifier-1")
    harness = next(t for t in doc["trusted"] if t["id"] == "harness-1")
    verifier["public_key"] = harness["public_key"]
    (folder / "service.yaml").write_text(yaml.safe_dump(doc))
    with serving(folder):
        pass


def test_revoke_key_refuses_the_principal(tmp_path: Path) -> None:
    folder = tmp_path / "svc"
    init_service_dir(folder)
    token = json.loads((folder / "credentials.json").read_text())["policy_tokens"]["policy-1"]
    key_file = folder / "principals" / "verifier-1.key"
    with serving(folder) as url:
        decide(url, folder, key_file, token)
    revoked = triz("service", "revoke-key", "--config", str(folder / "service.yaml"),
                   "--principal", "verifier-1")
    assert revoked.returncode == 0, revoked.stderr
    with serving(folder) as url:
        with pytest.raises(ServiceError) as refused:
            decide(url, folder, key_file, token)
        assert refused.value.status == 401
    unknown = triz("service", "revoke-key", "--config", str(folder / "service.yaml"),
                   "--principal", "nobody")
    assert unknown.returncode != 0
    # rotating a revoked principal gives it a new key and restores it
    assert triz("service", "rotate-key", "--config", str(folder / "service.yaml"),
                "--principal", "verifier-1").returncode == 0
    with serving(folder) as url:
        assert decide(url, folder, key_file, token)["seq"]
