"""OpenRLHF: a remote reward model route backed by the evaluator service (issue 16 item 2;
docs/integrations.md).

OpenRLHF's remote reward model (``--remote_rm_url``) posts a JSON request:
``{"query": [...], "prompts": [...], "labels": [...]}``, where each query is the prompt and
the response in the chat template.  It reads ``rewards`` from the answer as a list of numbers
(``torch.tensor(answer["rewards"])``), retries a failed request a few times, then stops.  Newer
versions also read ``scores`` and ``extra_logs``.  There is no header for a credential in that
request.

So the route runs as a small proxy beside the trainer, on loopback (:func:`create_proxy`,
``triz-eval serve-openrlhf``).  It holds the policy token and the training consumer's key, and
the service itself never offers an unauthenticated route.  For each request it:
1. hands each query in through the policy port (``access.to_artefact(label, query)``);
2. reads their rewards.  OpenRLHF's retry of the same request reuses the attempts handed in
   for it (the proxy keeps the last :data:`KEPT` requests' attempts), so a retry after a
   lost answer or a 503 reads the same attempts again and never hands them in twice;
3. answers ``rewards``, ``scores`` and ``extra_logs`` (reason, attempt id and unscorable flag
   per query).

An unscorable reward has no number OpenRLHF can take: ``None`` crashes ``torch.tensor``, and
NaN poisons the batch.  By default the proxy **fails loudly**: it answers 503 naming the
attempts and their reasons, so OpenRLHF's retries end in an error and not a silent fallback.
``mask=True`` answers 0.0 with ``extra_logs.triz_unscorable`` 1 instead, for a trainer that
drops those samples itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections import OrderedDict
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from .service_access import ServiceAccess

#: The route OpenRLHF's examples use for a remote reward model.
ROUTE = "/get_reward"
MAX_QUERIES = 512
#: How many requests' attempts the proxy keeps for OpenRLHF's retries.
KEPT = 1024


class RewardRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(min_length=1, max_length=MAX_QUERIES)
    prompts: list[str] | None = None
    labels: list[Any] | None = None


def create_proxy(access: ServiceAccess, *, mask: bool = False) -> FastAPI:
    """The OpenRLHF-compatible reward route over the service (see the module docstring)."""
    app = FastAPI(title="TRIZ-RI evaluator: OpenRLHF remote reward proxy")
    kept: OrderedDict[str, list[str]] = OrderedDict()

    @app.post(ROUTE)
    async def get_reward(body: RewardRequest) -> Any:
        labels = body.labels if body.labels is not None else [None] * len(body.query)
        if len(labels) != len(body.query):
            return JSONResponse({"error": f"{len(labels)} labels for {len(body.query)} "
                                          "queries"}, status_code=400)
        # The same request again (OpenRLHF's retry) reads the attempts handed in for it.
        digest = hashlib.sha256(json.dumps(body.model_dump(), sort_keys=True,
                                           default=str).encode()).hexdigest()
        try:
            attempts = kept.get(digest)
            if attempts is None:
                attempts = await asyncio.to_thread(access.submit, list(labels), body.query)
                kept[digest] = attempts
                while len(kept) > KEPT:
                    kept.popitem(last=False)
            results = await asyncio.to_thread(access.read, attempts,
                                              key=f"openrlhf-{secrets.token_hex(12)}")
        except Exception as e:  # the service refused or is down: fail loudly, never a 0
            return JSONResponse({"error": f"the evaluator service: {e}"}, status_code=503)
        unscorable = [r for r in results if r["reward"] is None]
        if unscorable and not mask:
            named = "; ".join(f"{r['attempt_id']}: {r['reason']}" for r in unscorable[:10])
            return JSONResponse({"error": f"{len(unscorable)} of {len(results)} responses "
                                          f"are unscorable ({named})"}, status_code=503)
        rewards = [0.0 if r["reward"] is None else float(r["reward"]) for r in results]
        return {"rewards": rewards, "scores": rewards,
                "extra_logs": {
                    "triz_unscorable": [int(r["reward"] is None) for r in results],
                    "triz_reason": [r["reason"] for r in results],
                    "triz_attempt_id": [r["attempt_id"] for r in results]}}

    return app
