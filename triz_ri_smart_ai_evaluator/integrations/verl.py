"""veRL: a ``compute_score`` backed by the evaluator service (issue 16 item 2;
docs/integrations.md).

veRL loads a custom reward function by path and name (``custom_reward_function.path`` and
``.name``).  Its reward managers call it in two ways:
- the naive manager, once per response:
  ``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)``;
- the batch manager, once per batch:
  ``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=)``.

A float is used as the reward.  From a dict, ``score`` is the reward and every key is appended
to that key's list in ``reward_extra_info``, so every dict must carry the same keys.

veRL has no "unscorable":
- ``None`` crashes it when the reward is written into the token tensor;
- ``NaN`` poisons the advantages of the whole group.

So the function made here **fails loudly by default**: an unscorable result raises
:class:`Unscorable`, naming the attempt and the reason, and training stops.  With
``on_unscorable="mask"`` it returns ``score`` 0.0 with ``triz_unscorable`` 1 instead, for a
trainer that masks those samples itself.  That is an explicit choice, never the default.

Every dict has the same keys: ``score``, ``triz_unscorable`` (0 or 1), ``triz_reason``,
``triz_attempt_id``, ``triz_ledger_seq``.  Nothing here imports veRL.  The tests replay veRL's
calling contract, since veRL does not install on a CPU-only machine.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from typing import Any, Literal

from .service_access import ServiceAccess, Unscorable

__all__ = ["OnUnscorable", "Unscorable", "make_verl_compute_score"]

OnUnscorable = Literal["raise", "mask"]


def _row(result: dict[str, Any], on_unscorable: OnUnscorable) -> dict[str, Any]:
    reward = result["reward"]
    unscorable = reward is None
    if unscorable and on_unscorable == "raise":
        raise Unscorable(f"attempt {result['attempt_id']}: {result['reason']}"
                         f"{': ' + result['detail'] if result.get('detail') else ''} "
                         "(on_unscorable='mask' scores it 0.0 with triz_unscorable=1)")
    score = 0.0 if unscorable else float(reward)
    if not math.isfinite(score):
        raise Unscorable(f"attempt {result['attempt_id']}: reward {reward!r} is not finite")
    return {"score": score, "triz_unscorable": int(unscorable),
            "triz_reason": str(result["reason"]), "triz_attempt_id": str(result["attempt_id"]),
            "triz_ledger_seq": int(result["ledger_seq"])}


def make_verl_compute_score(access: ServiceAccess, *, on_unscorable: OnUnscorable = "raise"
                            ) -> Callable[..., Any]:
    """veRL's ``compute_score`` over the service (see the module docstring).  The response
    text is handed in as the artefact (``access.to_artefact(ground_truth, text)``)."""
    if on_unscorable not in ("raise", "mask"):
        raise ValueError(f"on_unscorable must be 'raise' or 'mask', not {on_unscorable!r}")

    def compute_score(data_source: Any = None, solution_str: str | None = None,
                      ground_truth: Any = None, extra_info: Any = None, *,
                      data_sources: list[Any] | None = None,
                      solution_strs: list[str] | None = None,
                      ground_truths: list[Any] | None = None,
                      extra_infos: list[Any] | None = None,
                      **_: Any) -> dict[str, Any] | list[dict[str, Any]]:
        key = f"verl-{secrets.token_hex(12)}"
        if solution_strs is not None:  # the batch reward manager
            truths = ground_truths if ground_truths is not None else [None] * len(solution_strs)
            results = access.score(list(truths), list(solution_strs), key=key)
            return [_row(r, on_unscorable) for r in results]
        if solution_str is None:
            raise TypeError("compute_score needs solution_str (or solution_strs for a batch)")
        [result] = access.score([ground_truth], [solution_str], key=key)
        return _row(result, on_unscorable)

    return compute_score
