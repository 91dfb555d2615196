#!/usr/bin/python3
# Renders a braid step trace (training.trace_steps: run_dir/trace.json, docs/tracing.md) into a
# PNG for the documentation: one lane per track of every rank (compute, communication per group,
# checkpoint threads), nested spans one row further down, a colour per event category, and the
# ranks' processes labelled as in Perfetto. Drawing primitives come from render_trace.py.
#
#   python3 benchmarks/render_step_trace.py TRACE.json OUT.png [--width 1600] [--depth 3]
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render_trace as rt  # noqa: E402

ROW_H = 18
LANE_GAP = 6
LABEL_GAP = 10
# Categories written by braid (src/core/trace.cpp callers) and their colours.
COLOURS = {
    "step": (225, 225, 225),
    "phase": (200, 200, 200),
    "forward": (66, 133, 244),
    "backward": (244, 160, 66),
    "optimizer": (52, 168, 83),
    "collective": (171, 71, 188),
    "pipeline": (120, 170, 250),
    "pipeline_wait": (255, 205, 210),
    "checkpoint": (0, 150, 136),
}
OTHER = (160, 160, 160)


def load(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    processes, tracks, spans = {}, {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            tracks[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.setdefault((e["pid"], e["tid"]), []).append(
                (float(e["ts"]), float(e["dur"]), e.get("cat", ""), e["name"]))
    if not spans:
        raise SystemExit(f"{path}: no complete (X) events to draw")
    return processes, tracks, spans


def with_depth(spans):
    """(start, dur, cat, name, depth): depth = how many spans of the lane enclose it."""
    out, open_ends = [], []
    for start, dur, cat, name in sorted(spans, key=lambda s: (s[0], -s[1])):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        out.append((start, dur, cat, name, len(open_ends)))
        open_ends.append(start + dur)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="Renders a braid step trace into a PNG timeline.")
    ap.add_argument("trace")
    ap.add_argument("output")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--depth", type=int, default=3, help="nesting rows drawn per lane")
    args = ap.parse_args(argv)
    processes, tracks, spans = load(args.trace)
    lanes = sorted(spans)
    laid = {lane: [s for s in with_depth(spans[lane]) if s[4] < args.depth] for lane in lanes}
    rows = {lane: 1 + max(s[4] for s in laid[lane]) for lane in lanes}
    labels = {lane: f"{processes.get(lane[0], f'pid {lane[0]}')}: "
                    f"{tracks.get(lane, f'tid {lane[1]}')}" for lane in lanes}
    scale = rt.TEXT_SCALE
    label_w = max(rt.text_width(labels[lane], scale) for lane in lanes)
    left, right = rt.MARGIN + label_w + LABEL_GAP, args.width - rt.RIGHT_MARGIN
    if right - left < 100:
        raise SystemExit(f"--width {args.width} leaves no room for the time axis")
    t0 = min(s[0] for lane in lanes for s in laid[lane])
    t1 = max(s[0] + s[1] for lane in lanes for s in laid[lane])
    px_per_us = (right - left) / (t1 - t0) if t1 > t0 else 0.0
    lanes_h = sum(rows[lane] * ROW_H + LANE_GAP for lane in lanes)
    legend = [(COLOURS[c], c) for c in COLOURS]
    height = rt.MARGIN + lanes_h + rt.AXIS_H + rt.BLOCK_GAP + rt.LEGEND_SWATCH + rt.MARGIN
    canvas = rt.Canvas(args.width, height)
    y = rt.MARGIN
    for lane in lanes:
        canvas.draw_text(rt.MARGIN, y + (ROW_H - rt.text_height(scale)) // 2, labels[lane], scale,
                         rt.BLACK)
        for start, dur, cat, name, depth in laid[lane]:
            x0 = left + int(round((start - t0) * px_per_us))
            x1 = max(x0 + 1, left + int(round((start + dur - t0) * px_per_us)))
            top = y + depth * ROW_H
            fill = COLOURS.get(cat, OTHER)
            canvas.fill_rect(x0, top, x1, top + ROW_H - 2, fill)
            if x1 - x0 >= 3:
                canvas.outline_rect(x0, top, x1, top + ROW_H - 2, rt.darker(fill))
            w = rt.text_width(name, 1)
            if w + 4 <= x1 - x0:
                canvas.draw_text(x0 + 2, top + (ROW_H - 2 - rt.FONT_H) // 2, name, 1,
                                 rt.contrast_text(fill))
        y += rows[lane] * ROW_H + LANE_GAP
    rt.draw_axis(canvas, left, right, y + 3, px_per_us)
    rt.draw_legend(canvas, left, y + rt.AXIS_H + rt.BLOCK_GAP, legend)
    with open(args.output, "wb") as f:
        f.write(canvas.to_png())
    print(f"wrote {args.output} ({canvas.width}x{canvas.height}), {len(lanes)} lanes, "
          f"{(t1 - t0) / 1000:.1f} ms")


if __name__ == "__main__":
    main()
