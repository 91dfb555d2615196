#!/usr/bin/env python3
"""The braid-plot ctest: two runs (a real run's metrics.jsonl and a copy of it with scaled
losses) make a valid PNG of the expected size; bad input fails with a message. Exit 77 (skip)
when matplotlib is missing."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

PLOT, FIXTURE = sys.argv[1], sys.argv[2]

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("matplotlib is missing (scripts/install_deps.sh test installs python3-matplotlib): skip")
    sys.exit(77)


def run(*args):
    return subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True)


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}")
        sys.exit(1)


with tempfile.TemporaryDirectory() as tmp:
    first = os.path.join(tmp, "tiny")
    second = os.path.join(tmp, "tiny_higher_lr")
    os.makedirs(first)
    os.makedirs(second)
    shutil.copy(FIXTURE, os.path.join(first, "metrics.jsonl"))
    with open(FIXTURE) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    check(len(rows) >= 5 and any(r["val_loss"] is not None for r in rows),
          f"{FIXTURE} should be a real run's metrics with validation losses")
    with open(os.path.join(second, "metrics.jsonl"), "w") as f:
        for r in rows:
            r = dict(r, loss=r["loss"] * 1.1)
            f.write(json.dumps(r) + "\n")
        f.write('{"step": 99999, "lo')  # a run still writing its last line

    out = os.path.join(tmp, "plots", "loss.png")
    result = run(first, os.path.join(second, "metrics.jsonl"), "-o", out, "--title", "test")
    check(result.returncode == 0, f"braid-plot failed: {result.stderr}")
    with open(out, "rb") as f:
        png = f.read()
    check(png[:8] == b"\x89PNG\r\n\x1a\n", "the output does not start with the PNG signature")
    check(png[12:16] == b"IHDR", "the PNG has no IHDR chunk first")
    width, height = struct.unpack(">II", png[16:24])
    check((width, height) == (1500, 450), f"the PNG is {width}x{height}, expected 1500x450")
    # Three panels of curves, titles and legends: far more than an empty canvas's few KiB.
    check(len(png) > 30000, f"the PNG has only {len(png)} bytes: are the curves there?")
    check(png[-8:-4] == b"IEND", "the PNG does not end with its IEND chunk")

    result = run(os.path.join(tmp, "missing"), "-o", out)
    check(result.returncode == 2 and "missing" in result.stderr,
          f"a missing run should fail naming it: {result.returncode} {result.stderr}")
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"step": 1, "loss": 2.0}\nnot json\n{"step": 2, "loss": 1.0}\n')
    result = run(bad, "-o", out)
    check(result.returncode == 2 and "line 2 is not JSON" in result.stderr,
          f"a corrupt line should fail naming it: {result.returncode} {result.stderr}")
    result = run(first, "-o", os.path.join(tmp, "plot.svg"))
    check(result.returncode == 2 and "PNG" in result.stderr, "a non-PNG output name should fail")

print("braid-plot: every PNG and error check passed")
