"""The evaluator as a service (issue 6): the policy port and the trusted port over HTTP.

``config`` reads ``service.yaml``; ``auth`` maps credentials to principals (bearer tokens for
the evaluated policy, Ed25519-signed requests for trusted components); ``runtime`` holds the
ledger (on one thread), the access guard and the pilot harness's worker pool; ``app`` is the
FastAPI application; ``client`` is the Python client of both ports.
"""

from __future__ import annotations
