"""Pilot 02 runs per minute through the service, local threads against Ray workers (issue 16
item 4).

For each backend and each worker count W, a fresh service (SQLite ledger, uvicorn on loopback,
``harness.backend`` local or ray, ``harness.workers`` W) takes ``W * --runs-per-worker``
submissions of the bundled reference through the policy port at once and the script waits for
every outcome.  The Ray backend runs on a Ray head started here (``benchmarks/_ray.py``: 2 CPUs,
2 ``triz_harness`` slots).  The report gives runs per minute, and each row's ratio to local
with one worker measured in the same invocation.  Every run must complete with S = 2 and the
ledger must verify, or the script fails.  Needs root (the sandbox).

    .venv/bin/python benchmarks/ray_dispatch.py [--workers 1,2] [--runs-per-worker 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._ray import local_ray_head
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.examples import candidate_diff
from triz_ri_smart_ai_evaluator.service.app import create_app
from triz_ri_smart_ai_evaluator.service.client import PolicyClient
from triz_ri_smart_ai_evaluator.service.config import init_service_dir, load_config
from triz_ri_smart_ai_evaluator.service.inprocess import serve_app
from triz_ri_smart_ai_evaluator.service.runtime import Runtime

PILOT = "pilot_02_feedback_form"


def one_setting(root: Path, backend: str, workers: int, runs: int, address: str | None
                ) -> dict[str, Any]:
    folder = root / f"{backend}-{workers}"
    init_service_dir(folder)
    config_path = folder / "service.yaml"
    doc = yaml.safe_load(config_path.read_text("utf-8"))
    doc["harness"] = {"workers": workers, "out": "runs", "backend": backend,
                      **({"ray_address": address} if address else {})}
    config_path.write_text(yaml.safe_dump(doc), "utf-8")
    token = json.loads((folder / "credentials.json").read_text("utf-8"))["policy_tokens"][
        "policy-1"]
    config, base = load_config(config_path)
    runtime = Runtime.start(config, base)
    reference = candidate_diff("reference")
    try:
        with serve_app(create_app(runtime)) as url, PolicyClient(url, token) as policy:
            t0 = time.perf_counter()
            attempts = [policy.submit(PILOT, reference) for _ in range(runs)]
            open_ = set(attempts)
            signals: dict[str, Any] = {}
            while open_:
                time.sleep(0.5)
                for attempt in list(open_):
                    status = policy.status(attempt)
                    if status["status"] != "initiated":
                        signals[attempt] = (status["status"], status["final_signal"])
                        open_.discard(attempt)
            elapsed = time.perf_counter() - t0
    finally:
        runtime.close()
    bad = [s for s in signals.values() if s != ("completed", "2")]
    if bad:
        sys.exit(f"{backend}, {workers} worker(s): {len(bad)} of {runs} runs did not complete "
                 f"with S = 2: {bad[:3]}")
    verify = subprocess.run([str(Path(sys.executable).parent / "triz-eval"), "ledger", "verify",
                             "--db", str(folder / "ledger.db"), "--keys", str(folder / "keys")],
                            capture_output=True, text=True, check=False)
    if verify.returncode != 0:
        sys.exit(f"{backend}, {workers} worker(s): the ledger does not verify: "
                 f"{verify.stderr.strip()}")
    return {"backend": backend, "workers": workers, "runs": runs,
            "seconds": round(elapsed, 2), "runs_per_minute": round(runs / elapsed * 60, 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    p.add_argument("--runs-per-worker", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    counts = [int(c) for c in args.workers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="trz-bench-ray-") as tmp, local_ray_head() as head:
        for backend in ("local", "ray"):
            for workers in counts:
                rows.append(one_setting(Path(tmp), backend, workers,
                                        workers * args.runs_per_worker,
                                        head if backend == "ray" else None))
                if not args.json:
                    print(f"{backend}, {workers} worker(s): {rows[-1]['runs']} runs in "
                          f"{rows[-1]['seconds']} s", file=sys.stderr)
    base = rows[0]["runs_per_minute"]
    for row in rows:
        row["ratio_to_first"] = round(row["runs_per_minute"] / base, 2)
    if args.json:
        print(json.dumps({"cores": os.cpu_count(), "rows": rows}, indent=2))
        return 0
    print(f"pilot 02 reference through the service, {os.cpu_count()} cores")
    for row in rows:
        print(f"  {row['backend']:5s} {row['workers']} worker(s): "
              f"{row['runs_per_minute']:6.2f} runs/minute ({row['ratio_to_first']:.2f}x "
              "local with 1 worker)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
