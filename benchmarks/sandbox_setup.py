"""Cost of one sandboxed run's set-up and tear-down, against starting the same process bare.

Each cycle: open a Network (namespace, veth, nftables ruleset, sink, and the isolation probe
that verifies it), start a trivial process in the sandbox (bwrap, cgroups, rlimits) and wait
for its end (reaping and clean-up included), then tear the network down.  As a same-run
baseline, the same trivial process is started without any sandbox.  Needs root.  Run:

    .venv/bin/python benchmarks/sandbox_setup.py [--n 20] [--python] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triz_ri_smart_ai_evaluator.sandbox import (
    Network,
    PythonRuntime,
    probe_isolation,
    start_sandboxed,
)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(values) * 1000, "p95_ms": p95(values) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--python", action="store_true",
                        help="the trivial process is `python -c pass` instead of `true`")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    support = probe_isolation()
    if not support.available:
        sys.exit(f"sandbox isolation not available: {support.reason}")
    runtime = PythonRuntime.current()
    inside = [runtime.sandbox_python(), "-c", "pass"] if args.python else ["true"]
    outside = [runtime.host_python(), "-c", "pass"] if args.python else ["/usr/bin/true"]

    phases: dict[str, list[float]] = {"network_up_and_verify": [], "process_start_to_end": [],
                                      "network_down": [], "cycle": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="trz-bench-") as tmp:
        code = Path(tmp) / "code"
        code.mkdir()
        os.chmod(tmp, 0o755)
        code.chmod(0o755)
        for _ in range(args.n):
            t0 = time.perf_counter()
            net = Network().open()
            t1 = time.perf_counter()
            try:
                proc = start_sandboxed(inside, code_dir=code, network=net, runtime=runtime)
                outcome = proc.wait(30) or proc.stop()
                t2 = time.perf_counter()
            finally:
                net.close()
            t3 = time.perf_counter()
            if outcome.exit_code != 0:
                sys.exit(f"sandboxed process failed: {outcome}")
            phases["network_up_and_verify"].append(t1 - t0)
            phases["process_start_to_end"].append(t2 - t1)
            phases["network_down"].append(t3 - t2)
            phases["cycle"].append(t3 - t0)

            b0 = time.perf_counter()
            subprocess.run(outside, check=True)
            phases["baseline"].append(time.perf_counter() - b0)

    result = {name: summary(values) for name, values in phases.items()}
    set_up_and_down = [u + d for u, d in zip(phases["network_up_and_verify"],
                                             phases["network_down"], strict=True)]
    result["network_up_verify_down"] = summary(set_up_and_down)
    ratio = statistics.median(phases["cycle"]) / statistics.median(phases["baseline"])
    report = {"n": args.n, "process": " ".join(inside), "cgroup_limits": support.cgroup_limits,
              "phases": result, "cycle_over_baseline": ratio}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.n} cycles, trivial process: {' '.join(inside)}")
    for name, stats in result.items():
        print(f"  {name:24s} median {stats['median_ms']:8.1f} ms   p95 {stats['p95_ms']:8.1f} ms")
    print(f"  full cycle / bare start (median): {ratio:.0f}x")


if __name__ == "__main__":
    main()
