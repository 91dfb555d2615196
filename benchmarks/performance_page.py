#!/usr/bin/python3
# Writes docs/performance.md from the benchmarks' JSON results in docs/performance/.
#
#   python3 benchmarks/performance_page.py [--results DIR] [--out FILE] [--check]
#
# One section per benchmark whose result file is in DIR (its table, the command that produced
# it, the date and the machine), a "not measured yet" list with the commands of the others.
# Every result file must carry command, date, host, cpu and threads; a file without one of them
# is an error naming the field, never filled in. The text depends only on the files (fixed
# order and number formats), so --check can compare it with FILE and fail when FILE is stale.
# Standard library only.
import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
META_FIELDS = ("command", "date", "host", "cpu", "threads")
REGENERATE = "python3 benchmarks/performance_page.py"
# What the benchmarks' commands need built (Release, benchmarks on: the default build/).
BUILD = ("cmake --build build -j2 --target gpt_step_bench checkpoint_stall collective_bench "
         "dp_overlap tp_step_bench pipeline_bubble braid_micro_bench")


class PageError(Exception):
    """A result file the page cannot be made from; the message names the file and the field."""


def need(doc, path, where):
    """doc's value at the dotted path; a PageError naming where and the path when absent."""
    value = doc
    for key in path.split("."):
        if isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise PageError(f"{where}: missing field '{path}'")
    return value


def num(value, digits):
    """value with a fixed number of decimals; '-' for none (a JSON null, NaN)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"


def ratio(a, b, digits=2):
    """a / b as a fixed-decimal number; '-' where either side is missing or b is zero."""
    if a is None or b is None or b == 0:
        return "-"
    if any(isinstance(v, float) and not math.isfinite(v) for v in (a, b)):
        return "-"
    return num(a / b, digits)


def numeric(cell):
    """Whether a table cell is a number (or a percentage, or '-' for none)."""
    text = str(cell).rstrip("%")
    try:
        float(text)
        return True
    except ValueError:
        return text == "-"


def table(header, rows):
    """A Markdown table; columns of numbers right-aligned, the others left."""
    align = ["---:" if rows and all(numeric(r[i]) for r in rows) else "---"
             for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def mib(nbytes, digits):
    return "-" if nbytes is None else num(nbytes / 2**20, digits)


# ---- one renderer per benchmark: (file name, parsed JSON) -> Markdown lines --------------------

def render_cpu_vs_torch(name, doc):
    ceiling = need(doc, "sgemm_ceiling_gflops", name)
    configs = need(doc, "configs", name)
    rows = []
    for key in sorted(configs):
        entry = configs[key]
        sides = {impl: entry.get(impl) for impl in ("braid", "pytorch")}
        present = [s for s in sides.values() if s is not None]
        if not present:
            raise PageError(f"{name}: config '{key}' has neither a braid nor a pytorch result")
        cfg = need(present[0], "config", f"{name}: configs.{key}")
        model = (f"L={cfg['layers']} H={cfg['heads']} C={cfg['width']} V={cfg['vocab']} "
                 f"B={cfg['batch']} T={cfg['seq']}")

        def field(impl, f):
            side = sides[impl]
            return None if side is None else need(side, f, f"{name}: configs.{key}.{impl}")

        def pct(impl):
            gflops = field(impl, "achieved_gflops")
            return "-" if gflops is None else num(100.0 * gflops / ceiling, 1) + "%"

        rows.append([key, model, num(field("braid", "median_ms"), 1),
                     num(field("pytorch", "median_ms"), 1), num(field("braid", "tokens_per_s"), 1),
                     num(field("pytorch", "tokens_per_s"), 1),
                     ratio(field("braid", "tokens_per_s"), field("pytorch", "tokens_per_s")),
                     pct("braid"), pct("pytorch")])
    lines = [f"sgemm ceiling: {num(ceiling, 1)} GFLOP/s "
             f"({doc.get('sgemm_ceiling_library', 'library not recorded')}, 1024³, "
             f"{doc['threads']} threads).", ""]
    return lines + table(["config", "model", "braid ms/step", "PyTorch ms/step", "braid tokens/s",
                          "PyTorch tokens/s", "braid / PyTorch tokens/s", "braid % of ceiling",
                          "PyTorch % of ceiling"], rows)


GPT_PHASES = ("zero_grad", "forward", "backward", "grad_norm", "adamw")


def render_gpt_step(name, doc):
    cfg = need(doc, "config", name)
    step = need(doc, "median_ms", name)
    phases = need(doc, "phase_median_ms", name)
    order = [p for p in GPT_PHASES if p in phases] + sorted(set(phases) - set(GPT_PHASES))
    rows = [[p, num(phases[p], 1), ratio(100.0 * phases[p], step, 1) + "%"] for p in order]
    rows.append(["step", num(step, 1), "100.0%"])
    lines = [f"L={cfg['layers']} H={cfg['heads']} C={cfg['width']} V={cfg['vocab']} "
             f"B={cfg['batch']} T={cfg['seq']} on {cfg.get('device', 'cpu')}: "
             f"{num(need(doc, 'tokens_per_s', name), 1)} tokens/s.", ""]
    return lines + table(["phase", "median ms", "share of the step"], rows)


def render_checkpoint_stall(name, doc):
    rows_in = need(doc, "rows", name)
    sync = {(r["model"], r["every"]): r.get("stall_ms_mean") for r in rows_in
            if r.get("mode") == "sync"}
    rows = []
    for i, r in enumerate(rows_in):
        where = f"{name}: rows[{i}]"
        stall = need(r, "stall_ms_mean", where)
        rows.append([need(r, "model", where), need(r, "every", where), need(r, "mode", where),
                     num(stall, 1), ratio(stall, sync.get((r["model"], r["every"]))),
                     num(need(r, "ordinary_step_ms_median", where), 1),
                     num(need(r, "stall_per_ordinary_step", where), 2),
                     num(need(r, "after_checkpoint_inflation", where), 2),
                     num(need(r, "overhead_pct", where), 1),
                     num(need(r, "paired_overhead_pct_median", where), 1),
                     mib(need(r, "bytes_per_checkpoint", where), 1)])
    return table(["model", "every", "mode", "stall ms", "stall / sync stall", "step ms",
                  "stall / step", "after-checkpoint steps / ordinary", "overhead %",
                  "paired overhead %", "MiB per checkpoint"], rows)


def render_collectives(name, doc):
    results = need(doc, "results", name)
    rows = []
    for i, r in enumerate(sorted(results, key=lambda r: (r.get("op", ""), r.get("bytes", 0)))):
        where = f"{name}: results[{i}]"
        braid_bw, raw_bw = need(r, "braid_busbw_gbps", where), need(r, "raw_busbw_gbps", where)
        rows.append([need(r, "op", where), need(r, "bytes", where),
                     num(need(r, "braid_us", where), 1), num(need(r, "raw_us", where), 1),
                     num(braid_bw, 3), num(raw_bw, 3), ratio(braid_bw, raw_bw)])
    lines = [f"{need(doc, 'world_size', name)} ranks, {doc.get('backend', 'mpi')} backend, "
             f"busbw in GB/s ({doc.get('busbw_convention', 'nccl-tests')} convention).", ""]
    return lines + table(["op", "bytes", "braid µs", "MPI µs", "braid busbw", "MPI busbw",
                          "braid / MPI busbw"], rows)


def render_dp_overlap(name, doc):
    rows = [[label, num(need(doc, key, name), 1)] for label, key in
            (("backward alone", "t_bwd_ms"), ("buckets all-reduced alone", "t_comm_ms"),
             ("backward with DDP", "t_ddp_ms"), ("exposed communication", "exposed_ms"))]
    lines = [f"{need(doc, 'ranks', name)} ranks, gradient buckets: {need(doc, 'buckets', name)}; "
             f"{num(100.0 * need(doc, 'hidden_fraction', name), 0)}% of the all-reduce hidden "
             "behind the backward.", ""]
    return lines + table(["time per step", "ms"], rows)


TP_LAYOUTS = ("tp1", "tp2", "tp2_sp")


def render_tp_step(name, doc):
    layouts = need(doc, "layouts", name)
    base = need(layouts, "tp1.step_ms_median", name)
    order = [k for k in TP_LAYOUTS if k in layouts] + sorted(set(layouts) - set(TP_LAYOUTS))
    rows = []
    for k in order:
        where = f"{name}: layouts.{k}"
        s = layouts[k]
        step = need(s, "step_ms_median", where)
        rows.append([k, f"{need(s, 'tp', where)} x {need(s, 'threads_per_rank', where)}",
                     "on" if need(s, "sequence_parallel", where) else "off", num(step, 1),
                     ratio(step, base), mib(need(s, "bytes_measured", where), 3),
                     mib(need(s, "bytes_analytic", where), 3),
                     mib(need(s, "wire_bytes_per_rank", where), 3)])
    return table(["layout", "ranks x threads", "sequence parallel", "step ms", "step / tp=1 step",
                  "MiB/step measured", "MiB/step analytic", "wire MiB/rank"], rows)


def render_pipeline_bubble(name, doc):
    rows = []
    for i, r in enumerate(need(doc, "schedules", name)):
        where = f"{name}: schedules[{i}]"
        measured, analytic = need(r, "measured_bubble", where), need(r, "analytic_bubble", where)
        rows.append([need(r, "schedule", where), need(r, "virtual_stages", where),
                     need(r, "stages", where), need(r, "micro_batches", where), num(measured, 3),
                     num(need(r, "simulated_bubble", where), 3), num(analytic, 3),
                     ratio(measured, analytic), num(need(r, "forward_us_mean", where), 0),
                     num(need(r, "backward_us_mean", where), 0),
                     num(need(r, "step_ms_median", where), 1)])
    return table(["schedule", "virtual stages", "stages", "micro-batches", "measured bubble",
                  "simulated bubble", "analytic bubble", "measured / analytic", "forward µs",
                  "backward µs", "step ms"], rows)


def render_micro(name, doc):
    entries = need(doc, "benchmarks", name)
    # With --benchmark_repetitions the medians stand for the runs; else each run is its own row.
    medians = [b for b in entries if b.get("aggregate_name") == "median"]
    chosen = medians or [b for b in entries if b.get("run_type", "iteration") == "iteration"]
    rows = []
    for i, b in enumerate(sorted(chosen, key=lambda b: (b.get("name", ""),
                                                        b.get("repetition_index", 0)))):
        where = f"{name}: benchmarks[{i}]"
        bps = b.get("bytes_per_second")
        # Google Benchmark stores the "GFLOP/s" rate counter in FLOP/s (it prints it with a G).
        flops = b.get("GFLOP/s")
        runs = need(b, "repetitions", where) if medians else 1
        rows.append([b.get("run_name", need(b, "name", where)), runs,
                     num(need(b, "real_time", where), 3), need(b, "time_unit", where),
                     "-" if bps is None else num(bps / 1e9, 2),
                     "-" if flops is None else num(flops / 1e9, 1)])
    return table(["benchmark", "runs (median of)", "real time", "unit", "GB/s", "GFLOP/s"], rows)


def gbench_meta(doc):
    """Google Benchmark keeps the run's facts in its context (ops_bench adds command, cpu and
    threads there); the host is its host_name."""
    ctx = doc.get("context", {})
    return {"command": ctx.get("command"), "date": ctx.get("date"), "host": ctx.get("host_name"),
            "cpu": ctx.get("cpu"), "threads": ctx.get("threads")}


def top_meta(doc):
    return {f: doc.get(f) for f in META_FIELDS}


# name, result files, the command that writes them, what it measures, renderer, metadata reader.
BENCHMARKS = [
    {"name": "checkpoint_stall", "files": ["checkpoint_stall.json"],
     "command": "benchmarks/checkpoint_stall.sh --modes sync,async,overlapped --steps-124m 110 "
                "--after 8",
     "measures": "How long save_checkpoint() stops training in each checkpoint mode (sync, async, "
                 "overlapped), for the small GPT and GPT-2 124M's shape every 10 and 50 steps, "
                 "and what the checkpoints cost the steps after them and the whole run.",
     "render": render_checkpoint_stall, "meta": top_meta},
    {"name": "collectives", "files": ["collectives_np2.json", "collectives_np4.json"],
     "command": "benchmarks/collectives/run.sh",
     "measures": "Bus bandwidth of braid's MPI all-reduce, reduce-scatter and all-gather next to "
                 "the raw MPI calls in the same run, 4 KiB to 64 MiB, with 2 and 4 ranks.",
     "render": render_collectives, "meta": top_meta},
    {"name": "cpu_vs_torch", "files": ["cpu_vs_torch.json"],
     "command": "benchmarks/cpu_vs_torch.sh",
     "measures": "CPU training throughput of braid against PyTorch, same model, batch and "
                 "threads in one run (config a: GPT-2 small, B=4, T=64; config b: 4 layers of "
                 "width 256, B=8, T=128), each as a share of the machine's measured sgemm "
                 "ceiling (FLOPs/token = 6N + 6LTC).",
     "render": render_cpu_vs_torch, "meta": top_meta},
    {"name": "dp_overlap", "files": ["dp_overlap.json"],
     "command": "mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none "
                "build/benchmarks/dp_overlap --json benchmarks/results/dp_overlap.json",
     "measures": "How much of data parallel's gradient all-reduce hides behind the backward pass: "
                 "the backward alone, the buckets reduced alone, and the backward with DDP's "
                 "reductions launched from the gradient hooks (small GPT, 2 ranks).",
     "render": render_dp_overlap, "meta": top_meta},
    {"name": "gpt_step_bench", "files": ["gpt_step_bench.json"],
     "command": "build/benchmarks/gpt_step_bench --json benchmarks/results/gpt_step_bench.json",
     "measures": "One braid GPT training step (GPT-2 small, B=4, T=64, 2 threads, CPU) by phase: "
                 "zero_grad, forward, backward, gradient norm and AdamW, medians over the timed "
                 "steps.",
     "render": render_gpt_step, "meta": top_meta},
    {"name": "micro", "files": ["micro.json"],
     "command": "build/benchmarks/braid_micro_bench --benchmark_out=benchmarks/results/micro.json "
                "--benchmark_out_format=json",
     "measures": "Google Benchmark micro benchmarks of single operations (braid's matmul against "
                 "raw oneDNN and OpenBLAS sgemm, attention, LayerNorm, GELU, cross-entropy, "
                 "AdamW against memcpy) and of checkpoint snapshots and shard writes.",
     "render": render_micro, "meta": gbench_meta},
    {"name": "pipeline_bubble", "files": ["pipeline_bubble.json"],
     "command": "mpirun -np 4 --oversubscribe --allow-run-as-root --bind-to none "
                "build/benchmarks/pipeline_bubble --out benchmarks/results",
     "measures": "The pipeline bubble of GPipe, 1F1B and interleaved 1F1B as measured from a "
                 "traced step, as the schedule validator simulates it with the measured times, "
                 "and as the analytic (p - 1) / (v m + p - 1).",
     "render": render_pipeline_bubble, "meta": top_meta},
    {"name": "tp_step", "files": ["tp_step.json"],
     "command": "benchmarks/tp_bench.sh",
     "measures": "Tensor parallelism on the small GPT: step time and communication per step for "
                 "tp=1 on all cores and tp=2 (sequence parallelism off and on) on half the cores "
                 "per rank, in alternating rounds; measured bytes beside the analytic volume.",
     "render": render_tp_step, "meta": top_meta},
]


def load_results(results_dir):
    """{file name: parsed JSON} of the result files; a PageError for a file no benchmark writes."""
    known = {f for b in BENCHMARKS for f in b["files"]}
    found = {}
    names = sorted(os.listdir(results_dir)) if os.path.isdir(results_dir) else []
    for fname in names:
        path = os.path.join(results_dir, fname)
        if fname not in known:
            raise PageError(f"{path}: not a result file of any benchmark (expected one of: "
                            f"{', '.join(sorted(known))})")
        try:
            with open(path) as f:
                found[fname] = json.load(f)
        except json.JSONDecodeError as e:
            raise PageError(f"{path}: not valid JSON ({e})") from None
    return found


def meta_line(bench, fname, doc):
    meta = bench["meta"](doc)
    missing = [f for f in META_FIELDS if meta.get(f) in (None, "")]
    if missing:
        raise PageError(f"{fname}: missing field{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(repr(m) for m in missing)} (every result must carry "
                        f"{', '.join(META_FIELDS)}); rerun `{bench['command']}` to write them")
    threads = f"{meta['threads']} thread{'' if str(meta['threads']) == '1' else 's'}"
    return (f"Command: `{meta['command']}`. Date: {meta['date']}. Machine: {meta['host']}, "
            f"{meta['cpu']}, {threads}.")


def render_page(results):
    measured = [b for b in BENCHMARKS if any(f in results for f in b["files"])]
    missing = [b for b in BENCHMARKS if b not in measured]
    out = ["# braid performance", "",
           "<!-- Generated by benchmarks/performance_page.py from docs/performance/*.json; "
           "edit those, not this page. -->", "",
           "The latest result of each of braid's benchmarks: what it measures, its table, the "
           "command that produced it, and the date and machine of the run. Earlier results, "
           "and the dated analyses this page once held, are in git's history of "
           "`docs/performance/` and of this page.", "",
           "To regenerate it, build the benchmarks, run each one (it writes its JSON under "
           "`benchmarks/results/`), copy the result files into `docs/performance/` and write "
           f"the page; `{REGENERATE} --check` fails while the page is not what the files give.",
           "", "```bash", BUILD]
    out += [b["command"] for b in BENCHMARKS]
    stems = sorted(f[: -len(".json")] for b in BENCHMARKS for f in b["files"])
    out += [f"cp benchmarks/results/{{{','.join(stems)}}}.json docs/performance/",
            REGENERATE, "```", "",
            "| benchmark | command | result files |", "|---|---|---|"]
    out += [f"| {b['name']} | `{b['command']}` | {', '.join(b['files'])} |" for b in BENCHMARKS]
    for b in measured:
        out += ["", f"## {b['name']}", "", b["measures"]]
        for fname in b["files"]:
            if fname not in results:
                out += ["", f"`{fname}`: not measured yet."]
                continue
            doc = results[fname]
            line = meta_line(b, fname, doc)
            if len(b["files"]) > 1:
                out += ["", f"### {fname}"]
            out += [""] + b["render"](fname, doc) + ["", line]
    if missing:
        out += ["", "## Not measured yet", ""]
        out += [f"- {b['name']}: `{b['command']}`" for b in missing]
    return "\n".join(out) + "\n"


def first_difference(a, b):
    al, bl = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(al, bl)):
        if x != y:
            return f"line {i + 1}: the file has {y!r}, the results give {x!r}"
    return f"line {min(len(al), len(bl)) + 1}: one text ends there, the other goes on"


def main(argv):
    ap = argparse.ArgumentParser(description="Writes docs/performance.md from the benchmarks' "
                                             "JSON results.")
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "performance"),
                    help="folder of result JSON files (default docs/performance/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance.md"),
                    help="the page (default docs/performance.md)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; fail when --out differs from what the results give")
    args = ap.parse_args(argv)
    try:
        page = render_page(load_results(args.results))
    except PageError as e:
        print(f"performance_page.py: error: {e}", file=sys.stderr)
        return 1
    if args.check:
        current = open(args.out).read() if os.path.exists(args.out) else None
        if current == page:
            print(f"{args.out} is current")
            return 0
        why = "does not exist" if current is None else first_difference(page, current)
        print(f"performance_page.py: {args.out} is stale against {args.results} ({why}); "
              f"run `{REGENERATE}` to regenerate it", file=sys.stderr)
        return 1
    with open(args.out, "w") as f:
        f.write(page)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
