"""An Inspect AI eval of a scripted solver on pilot 02, scored by the evaluator service, with
every sample recorded in its ledger (issue 16; docs/integrations.md).

    .venv/bin/python examples/integrations/inspect_pilot02.py [--workers 2] [--log-dir DIR]

1. Starts a real evaluator service with the pilot 02 harness pool (sandbox) on loopback.
2. Runs an Inspect task of three samples with a scripted solver (no model is called):
   - the honest reference;
   - a bundled cheat (``false_ui_success``: a success page, no e-mail sent);
   - a sample whose solver breaks.
3. Scores with :func:`triz_signal`, the evaluator's verdict on what the solver handed in.
   Pilot 02 is in shadow mode, which keeps its signal out of training, not out of an eval, so
   the eval reads with purpose ``evaluation``.
4. Records every sample in the ledger with :func:`record_samples`, the broken one too.
5. Prints each sample's score and its attempt, then checks the ledger.

Needs the ``inspect`` extra and the sandbox (root, bubblewrap, nftables).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput
from inspect_ai.solver import Generate, TaskState, solver

from triz_ri_smart_ai_evaluator.integrations.inspect_eval import (
    SAMPLE_RECORD,
    record_samples,
    triz_signal,
)
from triz_ri_smart_ai_evaluator.integrations.service_access import ServiceAccess
from triz_ri_smart_ai_evaluator.ledger.log import LOG_VKEY_FILE, check_ledger, load_vkey
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.examples import bundled_candidates

# the examples' shared helper, next to this file (run as a script, its folder is on sys.path)
from _service import serve  # isort: skip

PILOT = "pilot_02_feedback_form"
SAMPLES = ("reference", "false_ui_success", "breaks")


@solver
def scripted() -> Any:
    """Hands in the bundled candidate the sample names; ``breaks`` raises, as a solver that
    hits an error would."""
    diffs = {e.name: e.diff for e in bundled_candidates()}

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        name = state.metadata["candidate"]
        if name == "breaks":
            raise RuntimeError("the scripted solver broke on purpose")
        state.output = ModelOutput.from_content(model="scripted",
                                                content=diffs[name].read_text())
        return state

    return solve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--log-dir", type=Path, help="where Inspect writes its log")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trz-inspect-") as tmp:
        folder = Path(tmp) / "svc"
        with serve(folder, args.workers) as (url, runtime):
            token = json.loads((folder / "credentials.json").read_text())["policy_tokens"]
            access = ServiceAccess(
                url=url, task_class=PILOT, policy_token=token["policy-1"],
                reader_id="trainer-1", reader_key=folder / "principals" / "trainer-1.key",
                recorder_id="harness-1", recorder_key=folder / "principals" / "harness-1.key",
                wait_seconds=120)
            recorded = record_samples(access)
            task = Task(dataset=[Sample(input="Fix the feedback form.", id=name,
                                        metadata={"candidate": name}) for name in SAMPLES],
                        solver=scripted(), scorer=triz_signal(access))
            # Inspect prints its banner on stdout: with --json, stdout is the summary alone.
            with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
                [log] = eval(task, model="mockllm/model",
                             log_dir=str(args.log_dir or Path(tmp)), fail_on_error=False,
                             display="none")
            store = runtime.store

            def ledger() -> dict[str, Any]:
                report = check_ledger(store, log_key=load_vkey(folder / "keys" / LOG_VKEY_FILE))
                records = [e for e in (json.loads(b) for _, b in store.scan())
                           if e["kind"] == "evidence.stored"
                           and e["data"].get("what") == SAMPLE_RECORD]
                return {"ok": report.ok, "size": store.size(),
                        "sample_records": {r["attempt"]: json.loads(
                            store.get_evidence(r["data"]["digest"])) for r in records}}

            checked = runtime.call_sync(ledger)
        samples = []
        for sample in log.samples or []:
            score = (sample.scores or {}).get("triz_signal")
            samples.append({
                "sample": sample.id,
                "error": None if sample.error is None else sample.error.message,
                "score": None if score is None else score.value,
                "reason": None if score is None else (score.metadata or {}).get("reason"),
                "attempt": recorded.recorded.get(sample.uuid or "")})
        summary = {"status": log.status, "samples": samples, "ledger": checked,
                   "metrics": {name: m.value for s in (log.results.scores if log.results else [])
                               for name, m in s.metrics.items()}}
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for s in samples:
            print(f"  {s['sample']:<18} score {s['score']!s:<6} {s['reason'] or s['error']} "
                  f"(attempt {s['attempt']})")
        print(f"metrics: {summary['metrics']}; ledger ok: {checked['ok']}, "
              f"{len(checked['sample_records'])} sample records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
