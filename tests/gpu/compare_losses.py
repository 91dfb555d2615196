#!/usr/bin/env python3
# Compares the per-step training losses two pretrain_gpt logs print (a CPU and a CUDA run of the
# same config and data): a table of the steps, and exit status 1 when any step's relative
# difference exceeds --rtol or the runs logged different steps.
#   tests/gpu/compare_losses.py CPU_LOG CUDA_LOG [--rtol 1e-4]
import argparse
import re
import sys

STEP = re.compile(r"step +(\d+)/\d+ \| loss ([-+0-9.eEinfa]+)")


def losses(path):
    found = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = STEP.search(line)
            if m:
                found[int(m.group(1))] = float(m.group(2))
    if not found:
        sys.exit(f"compare_losses.py: no 'step N/M | loss X' lines in {path}")
    return found


def main():
    ap = argparse.ArgumentParser(description="Compares two pretrain_gpt logs' losses step by step.")
    ap.add_argument("reference", help="the reference run's log (the CPU)")
    ap.add_argument("candidate", help="the run compared with it (the device)")
    ap.add_argument("--rtol", type=float, default=1e-4, help="largest relative difference allowed")
    args = ap.parse_args()
    ref, got = losses(args.reference), losses(args.candidate)
    if sorted(ref) != sorted(got):
        sys.exit(f"compare_losses.py: the runs logged different steps: {sorted(ref)} vs {sorted(got)}")
    worst = 0.0
    print(f"{'step':>6} {'reference':>12} {'candidate':>12} {'rel diff':>10}")
    for step in sorted(ref):
        a, b = ref[step], got[step]
        rel = abs(a - b) / max(abs(a), 1e-30)
        if rel != rel:  # NaN on either side
            rel = float("inf")
        worst = max(worst, rel)
        print(f"{step:>6} {a:>12.6f} {b:>12.6f} {rel:>10.2e}")
    verdict = "within" if worst <= args.rtol else "EXCEEDS"
    print(f"{len(ref)} steps; largest relative difference {worst:.2e}, {verdict} {args.rtol:g}")
    return 0 if worst <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
