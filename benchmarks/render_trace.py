#!/usr/bin/python3
# Renders a pipeline-parallel Chrome/Perfetto trace (written by src/parallel/pipeline/trace.cpp)
# into a PNG timeline for the documentation: one lane per stage, forward spans in blue, backward
# in orange, a lighter tone per model chunk, the micro-batch number inside each box, and idle
# time left white so the pipeline bubble is visible.
#
# Only the Python 3 standard library is used (no matplotlib, no PIL): the text comes from a
# built-in 5x7 bitmap font and the PNG is written by hand with zlib + struct.
#
#   python3 benchmarks/render_trace.py TRACE.json OUT.png [--title TEXT] [--width 1400]
#   python3 benchmarks/render_trace.py --stack A.json B.json ... -o OUT.png
#
# --stack draws several traces one under another in one picture. Stacked traces share one time
# scale by default, so the shorter schedule is visibly shorter; --no-common-scale stretches each
# trace over the full width instead. --title may be repeated, once per trace, to replace the
# schedule names stored in the traces. Per trace, stages, span and idle fraction go to stdout.
import argparse
import json
import math
import struct
import sys
import zlib

# ---------------------------------------------------------------------------------------------
# Bitmap font: 5x7 glyphs, one string per glyph, seven rows of five pixels ('#' = ink).
# Lowercase letters are drawn with the uppercase glyphs; 'x' has its own small glyph because it
# is mostly used as "times" (4 stages x 2 chunks).
# ---------------------------------------------------------------------------------------------
FONT_W, FONT_H = 5, 7

_GLYPH_ROWS = {
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "####. #...# #...# #...# #...# #...# ####.",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "J": "..### ...#. ...#. ...#. ...#. #..#. .##..",
    "K": "#...# #..#. #.#.. ##... #.#.. #..#. #...#",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #.#.# #...# #...# #...#",
    "N": "#...# #...# ##..# #.#.# #..## #...# #...#",
    "O": ".###. #...# #...# #...# #...# #...# .###.",
    "P": "####. #...# #...# ####. #.... #.... #....",
    "Q": ".###. #...# #...# #...# #.#.# #..#. .##.#",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "S": ".#### #.... #.... .###. ....# ....# ####.",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# #...# #...# .###.",
    "V": "#...# #...# #...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.",
    "X": "#...# #...# .#.#. ..#.. .#.#. #...# #...#",
    "Y": "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..",
    "Z": "##### ....# ...#. ..#.. .#... #.... #####",
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    "3": "##### ...#. ..#.. ...#. ....# #...# .###.",
    "4": "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ....# #...# .###.",
    "6": "..##. .#... #.... ####. #...# #...# .###.",
    "7": "##### ....# ...#. ..#.. .#... .#... .#...",
    "8": ".###. #...# #...# .###. #...# #...# .###.",
    "9": ".###. #...# #...# .#### ....# ...#. .##..",
    " ": "..... ..... ..... ..... ..... ..... .....",
    ".": "..... ..... ..... ..... ..... .##.. .##..",
    ",": "..... ..... ..... ..... .##.. ..#.. .#...",
    ":": "..... .##.. .##.. ..... .##.. .##.. .....",
    "(": "...#. ..#.. .#... .#... .#... ..#.. ...#.",
    ")": ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",
    "-": "..... ..... ..... ##### ..... ..... .....",
    "_": "..... ..... ..... ..... ..... ..... #####",
    "/": "..... ....# ...#. ..#.. .#... #.... .....",
    "=": "..... ..... ##### ..... ##### ..... .....",
    "x": "..... ..... #...# .#.#. ..#.. .#.#. #...#",
    "%": "##... ##..# ...#. ..#.. .#... #..## ...##",
    "+": "..... ..#.. ..#.. ##### ..#.. ..#.. .....",
    "?": ".###. #...# ....# ...#. ..#.. ..... ..#..",
}


def _parse_glyphs(rows_by_char):
    """Turns the '#'/'.' strings into lists of (dx, dy) ink pixels, checking their shape."""
    glyphs = {}
    for ch, text in rows_by_char.items():
        rows = text.split()
        assert len(rows) == FONT_H and all(len(r) == FONT_W for r in rows), ch
        glyphs[ch] = [(x, y) for y, row in enumerate(rows) for x, c in enumerate(row) if c == "#"]
    return glyphs


GLYPHS = _parse_glyphs(_GLYPH_ROWS)


def glyph_for(ch):
    """Exact glyph first (keeps the small 'x'), then the uppercase one, else '?'.
    Membership tests, not `or`: the space glyph is an empty (falsy) pixel list."""
    for key in (ch, ch.upper()):
        if key in GLYPHS:
            return GLYPHS[key]
    return GLYPHS["?"]


def text_width(text, scale):
    """Pixel width of text: 5 columns per glyph plus a 1-column gap between glyphs."""
    if not text:
        return 0
    return (len(text) * (FONT_W + 1) - 1) * scale


def text_height(scale):
    return FONT_H * scale


# ---------------------------------------------------------------------------------------------
# Canvas and PNG encoder.
# ---------------------------------------------------------------------------------------------
WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
GREY = (120, 120, 120)
LIGHT_GREY = (200, 200, 200)


class Canvas:
    """An RGB raster in one bytearray; every drawing call clips to the image."""

    def __init__(self, width, height, background=WHITE):
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def fill_rect(self, x0, y0, x1, y1, color):
        """Fills [x0, x1) x [y0, y1); whole row slices keep large images fast."""
        x0, x1 = max(0, x0), min(self.width, x1)
        y0, y1 = max(0, y0), min(self.height, y1)
        if x0 >= x1 or y0 >= y1:
            return
        run = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            start = (y * self.width + x0) * 3
            self.pixels[start:start + len(run)] = run

    def outline_rect(self, x0, y0, x1, y1, color):
        """1 px border just inside [x0, x1) x [y0, y1)."""
        self.fill_rect(x0, y0, x1, y0 + 1, color)
        self.fill_rect(x0, y1 - 1, x1, y1, color)
        self.fill_rect(x0, y0, x0 + 1, y1, color)
        self.fill_rect(x1 - 1, y0, x1, y1, color)

    def draw_text(self, x, y, text, scale, color):
        """Draws text with its top-left corner at (x, y); each font pixel becomes scale^2."""
        for i, ch in enumerate(text):
            gx = x + i * (FONT_W + 1) * scale
            for dx, dy in glyph_for(ch):
                px, py = gx + dx * scale, y + dy * scale
                self.fill_rect(px, py, px + scale, py + scale, color)

    def to_png(self):
        return encode_png(self.width, self.height, self.pixels)


def _png_chunk(tag, data):
    """length, tag, data, CRC-32 over tag + data (PNG spec, section 5.3)."""
    crc = zlib.crc32(tag + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)


def encode_png(width, height, rgb):
    """8-bit RGB PNG; every scanline uses filter type 0 (none), which any decoder accepts."""
    stride = width * 3
    raw = b"".join(b"\x00" + bytes(rgb[y * stride:(y + 1) * stride]) for y in range(height))
    # bit depth 8, colour type 2 (truecolour), compression 0, filter method 0, no interlace
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
            + _png_chunk(b"IDAT", zlib.compress(raw, 9)) + _png_chunk(b"IEND", b""))


# ---------------------------------------------------------------------------------------------
# Trace loading and statistics.
# ---------------------------------------------------------------------------------------------
class Span:
    __slots__ = ("stage", "start", "dur", "forward", "microbatch", "chunk")

    def __init__(self, stage, start, dur, forward, microbatch, chunk):
        self.stage, self.start, self.dur = stage, start, dur
        self.forward, self.microbatch, self.chunk = forward, microbatch, chunk


class Trace:
    def __init__(self, path, title, stages, spans):
        self.path, self.title, self.stages, self.spans = path, title, stages, spans
        self.t0 = min(s.start for s in spans)
        self.t1 = max(s.start + s.dur for s in spans)

    @property
    def span_us(self):
        return self.t1 - self.t0

    @property
    def chunks(self):
        return max(s.chunk for s in self.spans) + 1

    def idle_fraction(self):
        """Share of stage-time with no work: 1 - busy / (stages * span)."""
        if self.span_us <= 0:
            return 0.0
        busy = sum(s.dur for s in self.spans)
        return 1.0 - busy / (self.stages * self.span_us)


def _span_from_event(ev):
    """One "ph": "X" event -> Span; name ("F3.1") is the fallback for missing args."""
    name = str(ev.get("name", ""))
    args = ev.get("args") or {}
    cat = ev.get("cat")
    forward = cat == "forward" if cat in ("forward", "backward") else name.startswith("F")
    mb, chunk = args.get("microbatch"), args.get("chunk")
    if mb is None or chunk is None:
        head, _, tail = name[1:].partition(".")
        mb = int(head) if mb is None and head.isdigit() else mb
        chunk = int(tail) if chunk is None and tail.isdigit() else chunk
    return Span(int(ev["tid"]), float(ev["ts"]), float(ev["dur"]), forward,
                -1 if mb is None else int(mb), 0 if chunk is None else int(chunk))


def load_trace(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:  # a short message beats a traceback in a docs script
        raise SystemExit(f"{path}: {e}")
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc  # bare arrays are legal
    title, named_stages, spans = None, 0, []
    for ev in events:
        ph = ev.get("ph")
        if ph == "M" and ev.get("name") == "process_name":
            title = (ev.get("args") or {}).get("name", title)
        elif ph == "M" and ev.get("name") == "thread_name":
            named_stages = max(named_stages, int(ev.get("tid", 0)) + 1)
        elif ph == "X":
            spans.append(_span_from_event(ev))
    if not spans:
        raise SystemExit(f"{path}: no 'ph': 'X' span events")
    # A stage that never ran anything still has a thread_name entry and counts as idle.
    stages = max(named_stages, max(s.stage for s in spans) + 1)
    return Trace(path, title or path, stages, spans)


# ---------------------------------------------------------------------------------------------
# Layout and drawing.
# ---------------------------------------------------------------------------------------------
LANE_H, LANE_GAP = 28, 4
TEXT_SCALE = 2          # titles, stage labels, micro-batch numbers, legend
AXIS_SCALE = 1          # tick labels stay small so they do not crowd the axis
MARGIN, RIGHT_MARGIN = 12, 16
TITLE_GAP = 8           # between a title and its first lane
AXIS_H = 3 + 4 + 3 + FONT_H * AXIS_SCALE   # gap, tick, gap, label
BLOCK_GAP = 22          # between stacked traces
LEGEND_SWATCH = 14

# Per-chunk tones: chunk 0 darkest, later chunks lighter, so interleaved chunks stand apart.
FORWARD_TONES = [(31, 84, 160), (84, 146, 222), (150, 192, 240), (58, 112, 140)]
BACKWARD_TONES = [(196, 92, 10), (240, 160, 70), (250, 205, 140), (160, 110, 40)]


def span_colour(forward, chunk):
    tones = FORWARD_TONES if forward else BACKWARD_TONES
    return tones[chunk % len(tones)]


def darker(color, factor=0.6):
    return tuple(int(c * factor) for c in color)


def contrast_text(color):
    """White digits on dark boxes, black on light ones (Rec. 601 luma)."""
    luma = 0.299 * color[0] + 0.587 * color[1] + 0.114 * color[2]
    return WHITE if luma < 150 else BLACK


def nice_step(total, target_ticks=10):
    """Tick step from the 1-2-5 series giving about target_ticks ticks over total."""
    if total <= 0:
        return 1.0
    raw = total / target_ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def format_tick(value, step):
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{value:.{decimals}f}"


def trace_stats_text(trace):
    shape = f"{trace.stages} stages"
    if trace.chunks > 1:
        shape += f" x {trace.chunks} chunks"
    return f"{shape}, {trace.span_us / 1000:.1f} ms, idle {trace.idle_fraction() * 100:.1f}%"


def lanes_height(trace):
    return trace.stages * (LANE_H + LANE_GAP) - LANE_GAP


def block_height(trace):
    return text_height(TEXT_SCALE) + TITLE_GAP + lanes_height(trace) + AXIS_H


def draw_title(canvas, x, y, title, stats):
    """Schedule name in black, the numbers after it in grey."""
    canvas.draw_text(x, y, title, TEXT_SCALE, BLACK)
    gap = (FONT_W + 1) * TEXT_SCALE * 2
    canvas.draw_text(x + text_width(title, TEXT_SCALE) + gap, y, stats, TEXT_SCALE, GREY)


def draw_box(canvas, x0, x1, y, span):
    """One span: filled box, 1 px darker border, micro-batch number centred when it fits."""
    fill = span_colour(span.forward, span.chunk)
    canvas.fill_rect(x0, y, x1, y + LANE_H, fill)
    if x1 - x0 >= 3:  # a border on a 1-2 px sliver would hide its colour entirely
        canvas.outline_rect(x0, y, x1, y + LANE_H, darker(fill))
    if span.microbatch < 0:
        return
    label = str(span.microbatch)
    w, h = text_width(label, TEXT_SCALE), text_height(TEXT_SCALE)
    if w + 4 <= x1 - x0 and h + 4 <= LANE_H:
        tx = x0 + (x1 - x0 - w) // 2
        ty = y + (LANE_H - h) // 2
        canvas.draw_text(tx, ty, label, TEXT_SCALE, contrast_text(fill))


def draw_axis(canvas, left, right, y, px_per_us):
    """Baseline under the lanes with 1-2-5 ticks in milliseconds over the whole drawing width,
    so stacked traces on a common scale get identical, comparable rulers."""
    canvas.fill_rect(left, y, right, y + 1, LIGHT_GREY)
    canvas.draw_text(left - text_width("ms", AXIS_SCALE) - 8, y + 7, "ms", AXIS_SCALE, GREY)
    if px_per_us <= 0:
        return
    span_ms = (right - left) / px_per_us / 1000.0
    step = nice_step(span_ms)
    k = 0
    while k * step <= span_ms + 1e-9:
        x = left + int(round(k * step * 1000.0 * px_per_us))
        canvas.fill_rect(x, y, x + 1, y + 5, GREY)
        label = format_tick(k * step, step)
        lw = text_width(label, AXIS_SCALE)
        lx = min(x - lw // 2, canvas.width - lw - 1)  # keep the last label inside the image
        canvas.draw_text(lx, y + 7, label, AXIS_SCALE, GREY)
        k += 1


def draw_trace(canvas, trace, title, top, left, right, px_per_us):
    """Title, one lane per stage and the time axis; returns the y just below the block."""
    draw_title(canvas, left, top, title, trace_stats_text(trace))
    lanes_top = top + text_height(TEXT_SCALE) + TITLE_GAP
    label_h = text_height(TEXT_SCALE)
    for stage in range(trace.stages):
        y = lanes_top + stage * (LANE_H + LANE_GAP)
        label = f"S{stage}"
        lx = left - text_width(label, TEXT_SCALE) - 8
        canvas.draw_text(lx, y + (LANE_H - label_h) // 2, label, TEXT_SCALE, BLACK)
    for span in trace.spans:
        y = lanes_top + span.stage * (LANE_H + LANE_GAP)
        # Both edges are rounded from absolute times, so back-to-back spans share no pixel.
        x0 = left + int(round((span.start - trace.t0) * px_per_us))
        x1 = left + int(round((span.start + span.dur - trace.t0) * px_per_us))
        draw_box(canvas, x0, max(x1, x0 + 1), y, span)
    axis_y = lanes_top + lanes_height(trace) + 3
    draw_axis(canvas, left, right, axis_y, px_per_us)
    return top + block_height(trace)


def legend_entries(traces):
    """(colour, text) for each direction/chunk pair that occurs in any trace."""
    max_chunks = max(t.chunks for t in traces)
    entries = []
    for forward in (True, False):
        word = "forward" if forward else "backward"
        for chunk in range(max_chunks):
            text = f"{word} chunk {chunk}" if max_chunks > 1 else word
            entries.append((span_colour(forward, chunk), text))
    return entries


def draw_legend(canvas, x, y, entries):
    for colour, text in entries:
        canvas.fill_rect(x, y, x + LEGEND_SWATCH, y + LEGEND_SWATCH, colour)
        canvas.outline_rect(x, y, x + LEGEND_SWATCH, y + LEGEND_SWATCH, darker(colour))
        x += LEGEND_SWATCH + 6
        canvas.draw_text(x, y, text, TEXT_SCALE, BLACK)
        x += text_width(text, TEXT_SCALE) + 24


def render(traces, titles, width, common_scale):
    max_stage_label = text_width(f"S{max(t.stages for t in traces) - 1}", TEXT_SCALE)
    left = MARGIN + max_stage_label + 8
    right = width - RIGHT_MARGIN
    if right - left < 100:
        raise SystemExit(f"--width {width} leaves no room for the time axis")
    legend_h = LEGEND_SWATCH
    height = (MARGIN + sum(block_height(t) for t in traces) + BLOCK_GAP * (len(traces) - 1)
              + BLOCK_GAP + legend_h + MARGIN)
    canvas = Canvas(width, height)
    longest = max(t.span_us for t in traces)
    y = MARGIN
    for trace, title in zip(traces, titles):
        # One scale for all traces lets the reader compare lengths; own scale fills the width.
        span = longest if common_scale else trace.span_us
        px_per_us = (right - left) / span if span > 0 else 0.0
        y = draw_trace(canvas, trace, title, y, left, right, px_per_us) + BLOCK_GAP
    draw_legend(canvas, left, y, legend_entries(traces))
    return canvas


# ---------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------
def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Renders pipeline Chrome/Perfetto trace JSON files into a PNG timeline.")
    ap.add_argument("files", nargs="*", metavar="FILE", help="TRACE.json OUT.png")
    ap.add_argument("--stack", nargs="+", metavar="TRACE",
                    help="several traces drawn one under another (needs -o)")
    ap.add_argument("-o", "--output", help="output PNG (required with --stack)")
    ap.add_argument("--title", action="append",
                    help="title text, once per trace (default: the trace's process_name)")
    ap.add_argument("--width", type=int, default=1400, help="image width in pixels")
    ap.add_argument("--common-scale", action=argparse.BooleanOptionalAction, default=True,
                    help="one time scale for all stacked traces (default on)")
    args = ap.parse_args(argv)

    if args.stack:
        if args.files:
            ap.error("with --stack, give the output with -o, not as a positional")
        args.inputs = args.stack
    elif len(args.files) == 2 and not args.output:
        args.inputs, args.output = [args.files[0]], args.files[1]
    elif len(args.files) == 1 and args.output:
        args.inputs = args.files
    else:
        ap.error("expected TRACE.json OUT.png, or --stack A.json B.json ... -o OUT.png")
    if not args.output:
        ap.error("--stack needs -o OUT.png")
    if args.title and len(args.title) != len(args.inputs):
        ap.error(f"{len(args.title)} --title for {len(args.inputs)} trace(s)")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    traces = [load_trace(p) for p in args.inputs]
    titles = args.title or [t.title for t in traces]
    for trace, title in zip(traces, titles):
        print(f"{trace.path}: {title}: stages={trace.stages} span={trace.span_us / 1000:.3f} ms "
              f"idle={trace.idle_fraction() * 100:.1f}%")
    canvas = render(traces, titles, args.width, args.common_scale)
    with open(args.output, "wb") as f:
        f.write(canvas.to_png())
    print(f"wrote {args.output} ({canvas.width}x{canvas.height})")


if __name__ == "__main__":
    main()
