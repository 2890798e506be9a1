"""Drafts per second through the mechanical layer on one core, against a bare NFKC pass.

Runs ``check_draft`` over every draft of the labelled corpus (``tests/verifier/corpus``),
repeating the corpus until at least ``--seconds`` (default 5) have passed, and in the same run
times plain ``unicodedata.normalize("NFKC", text)`` over the same texts as a baseline.  Prints
both rates and their ratio; the target is 1,000 drafts/s.  Run:

    .venv/bin/python benchmarks/mechanical_layer.py [--seconds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triz_ri_smart_ai_evaluator.verifier.input_files import load_brief
from triz_ri_smart_ai_evaluator.verifier.inputs import Draft
from triz_ri_smart_ai_evaluator.verifier.mechanical import check_draft

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "verifier" / "corpus"
TARGET = 1_000


def rate(fn: Callable[[], None], n: int, seconds: float) -> tuple[float, int]:
    """Items per second of ``fn`` (``n`` items a call), repeated for at least ``seconds``."""
    rounds = 0
    started = time.perf_counter()
    while True:
        fn()
        rounds += 1
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return rounds * n / elapsed, rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    briefs = {p.stem: load_brief(p) for p in sorted((CORPUS / "briefs").glob("*.json"))}
    rows = [json.loads(line) for name in ("drafts.jsonl", "injected.jsonl")
            for line in (CORPUS / name).read_text("utf-8").splitlines()]
    # Grouped by brief, as a gate sees them (many steps of one run against one brief).
    rows.sort(key=lambda r: r["brief"])
    work = [(briefs[r["brief"]], Draft(format="triz-draft/1", step=r["step"], text=r["text"]))
            for r in rows]
    texts = [d.text for _, d in work]

    def mechanical() -> None:
        for brief, draft in work:
            check_draft(brief, draft)

    def nfkc() -> None:
        for text in texts:
            unicodedata.normalize("NFKC", text)

    mech_rate, mech_rounds = rate(mechanical, len(work), args.seconds)
    nfkc_rate, _ = rate(nfkc, len(texts), min(args.seconds, 2.0))
    result = {
        "drafts": len(work),
        "mean_draft_chars": round(sum(map(len, texts)) / len(texts)),
        "rounds": mech_rounds,
        "check_draft_per_s": round(mech_rate),
        "nfkc_per_s": round(nfkc_rate),
        "check_draft_vs_nfkc": round(mech_rate / nfkc_rate, 5),
        "target_per_s": TARGET,
        "meets_target": mech_rate >= TARGET,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"check_draft: {mech_rate:,.0f} drafts/s on one core over {len(work)} corpus "
              f"drafts x {mech_rounds} rounds (target {TARGET:,}); plain NFKC: "
              f"{nfkc_rate:,.0f} texts/s; ratio {mech_rate / nfkc_rate:.4f}")


if __name__ == "__main__":
    main()
