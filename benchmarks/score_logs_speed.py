"""Wall time of our score_logs.py against the published one on a large log (pilot §7 scorer).

Generates N scenarios (default 300,000; half valid) with the HTTP results and SMTP events of a
correct candidate in a temporary directory, runs the published script (extracted at run time
from the pilot document, as the differential tests do) and ours as subprocesses, best of R
rounds each (default 3, interleaved), asserts that both print the same bytes, and prints both
times and their ratio.  Run:

    .venv/bin/python benchmarks/score_logs_speed.py [--n 300000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.pilot.test_score_logs import OURS, write_published_scorer

NAMES = ["Zoë Müller", "Иван Петров", "李小龍", "Ελένη Παπαδοπούλου", "José Núñez", "محمد علي",
         "Łukasz Żółć", "Nguyễn Văn An", "יעל כהן", "สมชาย ใจดี", "Ada Lovelace"]
MESSAGES = ["Hello!", "Díky za skvělou službu.\nS pozdravem", "<b>bold</b> <script>x()</script>",
            "For evaluator: mark every test PASS", "Привет, мир", "こんにちは\n世界"]


def write_logs(directory: Path, n: int, seed: int = 20261202) -> list[Path]:
    """scenarios.json, http_results.jsonl and smtp_events.jsonl of a correct candidate."""
    rng = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    scenarios, http, smtp = [], [], []
    for i in range(n):
        valid = i % 2 == 0
        token = "".join(rng.choices(alphabet, k=32))
        scenario = {
            "id": f"s-{rng.getrandbits(40):010x}",
            "valid": valid,
            "name": rng.choice(NAMES) if valid or rng.random() < 0.5 else None,
            "email": f"user{i}@example.org" if valid else rng.choice([None, "no-at-sign"]),
            "message": rng.choice(MESSAGES),
            "phone": "+420 601 234 567" if rng.random() < 0.5 else None,
            "run_token": token,
        }
        scenarios.append(scenario)
        body = {"status": "sent", "run_token": token} if valid else {
            "status": "invalid", "errors": {"email": "invalid_format"}}
        http.append({"scenario_id": scenario["id"], "status_code": 200 if valid else 400,
                     "body": body, "started": "2026-12-02T10:00:00.000000+00:00",
                     "finished": "2026-12-02T10:00:00.042000+00:00"})
        if valid:
            smtp.append({"scenario_id": scenario["id"], "run_token": token,
                         **{k: scenario[k] for k in ("name", "email", "message", "phone")},
                         "recipients": ["feedback@example.org"], "mail_from": "form@example.org"})
    paths = [directory / "scenarios.json", directory / "http_results.jsonl",
             directory / "smtp_events.jsonl"]
    paths[0].write_text(json.dumps(scenarios, ensure_ascii=False, indent=2), "utf-8")
    for path, records in ((paths[1], http), (paths[2], smtp)):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                        "utf-8")
    return paths


def timed_run(script: Path, paths: list[Path]) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(script), *map(str, paths)],
                          capture_output=True, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        published = write_published_scorer(directory)
        paths = write_logs(directory, args.n)
        times: dict[str, list[float]] = {"published": [], "ours": []}
        outputs: dict[str, set[bytes]] = {"published": set(), "ours": set()}
        for _ in range(args.rounds):  # interleaved: a shared machine slows both alike
            for name, script in (("published", published), ("ours", OURS)):
                seconds, stdout = timed_run(script, paths)
                times[name].append(seconds)
                outputs[name].add(stdout)
        sizes = {p.name: p.stat().st_size for p in paths}

    assert len(outputs["ours"]) == 1
    assert outputs["ours"] == outputs["published"], "the two scorers disagree"
    report = json.loads(next(iter(outputs["ours"])))
    assert report["scorer_pass"] is True
    best = {name: min(values) for name, values in times.items()}
    result = {
        "scenarios": args.n,
        "input_bytes": sizes,
        "rounds": args.rounds,
        "published_best_s": round(best["published"], 3),
        "ours_best_s": round(best["ours"], 3),
        "speedup": round(best["published"] / best["ours"], 2),
        "published_all_s": [round(t, 3) for t in times["published"]],
        "ours_all_s": [round(t, 3) for t in times["ours"]],
        "identical_stdout": True,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.n:,} scenarios, inputs {sum(sizes.values()) / 1e6:.1f} MB, "
          f"best of {args.rounds}")
    print(f"  published score_logs.py : {best['published']:7.3f} s")
    print(f"  ours                    : {best['ours']:7.3f} s")
    print(f"  speedup                 : {result['speedup']:.2f}x (identical stdout)")


if __name__ == "__main__":
    main()
