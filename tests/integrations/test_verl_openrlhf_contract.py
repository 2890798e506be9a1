"""veRL's ``compute_score`` and OpenRLHF's remote reward route against a real service, replaying
each trainer's recorded calling contract (issue 16 item 2): neither trainer installs on a
CPU-only machine, so the tests call the adapters exactly the way the trainers do.

- **veRL 0.9.** The naive reward manager calls ``compute_score(data_source=, solution_str=,
  ground_truth=, extra_info=)`` once per response; the batch manager calls it once with
  ``data_sources=, solution_strs=, ground_truths=, extra_infos=``.  A dict's ``score`` is the
  reward, and each of its keys is appended to that key's list in ``reward_extra_info``, which
  must keep one entry per response.  ``None`` crashes veRL; NaN poisons a group.
- **OpenRLHF 0.8+.** ``--remote_rm_url`` gets a POST of
  ``{"query": [...], "prompts": [...], "labels": [...]}``.  The answer's ``rewards`` goes
  through ``torch.tensor``, and a failed request is retried up to five times before OpenRLHF
  raises.

Awards come from the trusted harness outside the service of the TRL test, chosen by the text
each response starts with.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.integrations.test_trl_adapter import OutsideHarness
from tests.service.conftest import Service, start_service
from tests.service.test_owner_loop_control import serve_training_rules
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.integrations.openrlhf import ROUTE, create_proxy
from triz_ri_smart_ai_evaluator.integrations.service_access import ServiceAccess
from triz_ri_smart_ai_evaluator.integrations.verl import Unscorable, make_verl_compute_score
from triz_ri_smart_ai_evaluator.service.inprocess import serve_app


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Service, ServiceAccess]]:
    """A service with pilot 02 in training mode, the outside harness and an access for it."""
    for service in start_service(tmp_path / "svc"):
        with service.trusted(Role.OWNER) as owner:
            serve_training_rules(service.runtime, owner)
        harness = OutsideHarness(service)
        harness.start()
        access = ServiceAccess(url=service.base_url, task_class="pilot_02_feedback_form",
                               policy_token=service.tokens["policy-1"], reader_id="trainer-1",
                               reader_key=service.folder / "principals" / "trainer-1.key",
                               wait_seconds=3)
        try:
            yield service, access
        finally:
            harness.stop.set()
            harness.join(timeout=10)


# -- veRL ---------------------------------------------------------------------------------------

def _naive_manager(compute_score: Any, responses: list[str]) -> tuple[list[float],
                                                                       dict[str, list[Any]]]:
    """veRL's naive reward manager, as recorded: one call per response, the dict's keys into
    reward_extra_info."""
    rewards, extra = [], defaultdict(list)
    for text in responses:
        score = compute_score(data_source="pilot_02", solution_str=text, ground_truth=None,
                              extra_info={"index": len(rewards)})
        if isinstance(score, dict):
            reward = score["score"]
            for key, value in score.items():
                extra[key].append(value)
        else:
            reward = score
        rewards.append(torch.tensor(reward, dtype=torch.float32).item())
    return rewards, dict(extra)


def test_verl_naive_manager_gets_real_numbers_and_aligned_extras(world: Any) -> None:
    _, access = world
    rewards, extra = _naive_manager(make_verl_compute_score(access),
                                    ["honest: a", "unverified: b", "honest: c"])
    assert rewards == [2.0, 0.0, 2.0]
    assert extra["triz_reason"] == ["verified", "not_verified", "verified"]
    assert all(len(values) == 3 for values in extra.values()), "one entry per response"
    assert set(extra) == {"score", "triz_unscorable", "triz_reason", "triz_attempt_id",
                          "triz_ledger_seq"}


def test_verl_fails_loudly_on_unscorable_by_default(world: Any) -> None:
    _, access = world
    with pytest.raises(Unscorable, match="pending"):
        _naive_manager(make_verl_compute_score(access), ["honest: a", "unscorable: b"])


def test_verl_mask_mode_flags_the_unscorable(world: Any) -> None:
    _, access = world
    rewards, extra = _naive_manager(make_verl_compute_score(access, on_unscorable="mask"),
                                    ["unscorable: a", "honest: b"])
    assert rewards == [0.0, 2.0]
    assert extra["triz_unscorable"] == [1, 0]
    assert not any(math.isnan(r) for r in rewards), "never a NaN into veRL"


def test_verl_batch_manager(world: Any) -> None:
    _, access = world
    rows = make_verl_compute_score(access)(
        data_sources=["p", "p"], solution_strs=["honest: a", "unverified: b"],
        ground_truths=[None, None], extra_infos=[{}, {}])
    assert [(r["score"], r["triz_reason"]) for r in rows] == [(2.0, "verified"),
                                                               (0.0, "not_verified")]


# -- OpenRLHF -----------------------------------------------------------------------------------

def _proxy(access: ServiceAccess, *, mask: bool = False) -> Iterator[str]:
    with serve_app(create_proxy(access, mask=mask), name="OpenRLHF proxy") as base:
        yield f"{base}{ROUTE}"


def _openrlhf_call(url: str, queries: list[str]) -> httpx.Response:
    """OpenRLHF's request: the queries, their prompts and labels, as JSON."""
    body = {"query": queries, "prompts": ["p"] * len(queries), "labels": [""] * len(queries)}
    return httpx.post(url, json=body, timeout=60, trust_env=False)


def test_openrlhf_route_answers_rewards_torch_takes(world: Any) -> None:
    _, access = world
    for url in _proxy(access):
        answer = _openrlhf_call(url, ["honest: a", "unverified: b"])
        assert answer.status_code == 200, answer.text
        data = answer.json()
        assert torch.tensor(data["rewards"]).tolist() == [2.0, 0.0]
        assert data["extra_logs"]["triz_reason"] == ["verified", "not_verified"]
        # OpenRLHF's retry of the same request gets the same attempts and rewards back
        again = _openrlhf_call(url, ["honest: a", "unverified: b"]).json()
        assert again["extra_logs"]["triz_attempt_id"] == data["extra_logs"]["triz_attempt_id"]


def test_openrlhf_route_fails_loudly_on_unscorable(world: Any) -> None:
    service, access = world
    for url in _proxy(access):
        answer = _openrlhf_call(url, ["honest: a", "unscorable: b"])
        assert answer.status_code == 503
        assert "1 of 2 responses are unscorable" in answer.json()["error"]
        assert "pending" in answer.json()["error"]
        # OpenRLHF retries the same request: the same attempts are read, none handed in twice
        opened = sum(e["kind"] == "attempt.initiated" for e in service.events())
        assert _openrlhf_call(url, ["honest: a", "unscorable: b"]).status_code == 503
        assert sum(e["kind"] == "attempt.initiated" for e in service.events()) == opened
        assert _openrlhf_call(url, []).status_code == 422
    for url in _proxy(access, mask=True):
        data = _openrlhf_call(url, ["unscorable: c"]).json()
        assert (data["rewards"], data["extra_logs"]["triz_unscorable"]) == ([0.0], [1])


def test_the_proxy_command_refuses_a_folder_without_credentials(tmp_path: Path) -> None:
    from tests.acceptance._cli import cli

    done = cli(tmp_path, "service", "openrlhf-proxy", "--url", "http://127.0.0.1:9",
               "--service-dir", tmp_path / "missing")
    assert done.returncode == 2
    assert "credentials.json: no policy token for 'policy-1'" in done.stderr
    assert "Traceback" not in done.stderr
