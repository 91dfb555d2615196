#!/usr/bin/python3
# Tests benchmarks/performance_page.py on the fixture results in benchmarks/testdata/performance/:
# each table's rows and ratios against values worked out by hand from the fixtures, the "not
# measured yet" list, the missing-field errors, and --check on a fresh and on a changed page.
# Standard library only; run directly or through ctest (docs.performance_page).
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "performance_page.py")
FIXTURES = os.path.join(HERE, "testdata", "performance")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def section(page, title):
    """The lines of the '## title' section, up to the next '## '."""
    lines = page.splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def table_rows(lines):
    """The body rows of the first Markdown table in lines, as lists of cells."""
    rows = [l for l in lines if l.startswith("| ")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows[1:]]


class PerformancePageTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="braid_perf_page_")
        self.results = os.path.join(self.tmp, "results")
        self.out = os.path.join(self.tmp, "performance.md")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def copy_fixtures(self, names=None):
        os.makedirs(self.results)
        for f in sorted(os.listdir(FIXTURES)):
            if names is None or f in names:
                shutil.copy(os.path.join(FIXTURES, f), self.results)

    def generate(self):
        r = run("--results", self.results, "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.out) as f:
            return f.read()

    def edit_fixture(self, name, change):
        path = os.path.join(self.results, name)
        with open(path) as f:
            doc = json.load(f)
        change(doc)
        with open(path, "w") as f:
            json.dump(doc, f)

    def test_cpu_vs_torch_rows_hold_ratios_and_ceiling_shares(self):
        self.copy_fixtures()
        rows = table_rows(section(self.generate(), "cpu_vs_torch"))
        # a: 300 / 100 tokens/s = 3.00; 120 and 40 GFLOP/s of a 160 ceiling = 75.0% and 25.0%.
        # b: 2000 / 800 = 2.50; 140 and 56 of 160 = 87.5% and 35.0%.
        self.assertEqual(rows, [
            ["a", "L=12 H=12 C=768 V=50257 B=4 T=64", "853.3", "2560.0", "300.0", "100.0", "3.00",
             "75.0%", "25.0%"],
            ["b", "L=4 H=4 C=256 V=50257 B=8 T=128", "512.0", "1280.0", "2000.0", "800.0", "2.50",
             "87.5%", "35.0%"]])

    def test_cpu_vs_torch_without_pytorch_shows_dashes(self):
        self.copy_fixtures()
        self.edit_fixture("cpu_vs_torch.json", lambda d: d["configs"]["b"].pop("pytorch"))
        rows = table_rows(section(self.generate(), "cpu_vs_torch"))
        self.assertEqual(rows[1], ["b", "L=4 H=4 C=256 V=50257 B=8 T=128", "512.0", "-",
                                   "2000.0", "-", "-", "87.5%", "-"])

    def test_every_other_table_from_the_fixture_values(self):
        self.copy_fixtures()
        page = self.generate()
        # The step over tp=1's 100 ms; 3 MiB, 4 MiB, 1.5 MiB and 2 MiB of bytes.
        self.assertEqual(table_rows(section(page, "tp_step")), [
            ["tp1", "1 x 2", "off", "100.0", "1.00", "0.000", "0.000", "0.000"],
            ["tp2", "2 x 1", "off", "80.0", "0.80", "3.000", "3.000", "1.500"],
            ["tp2_sp", "2 x 1", "on", "90.0", "0.90", "4.000", "4.000", "2.000"]])
        # measured / analytic: 0.3 / 0.25, 0.25 / 0.25, 0.2 / 0.16.
        self.assertEqual([(r[0], r[4], r[6], r[7]) for r in table_rows(section(page,
                                                                               "pipeline_bubble"))],
                         [("gpipe", "0.300", "0.250", "1.20"), ("1f1b", "0.250", "0.250", "1.00"),
                          ("interleaved_1f1b", "0.200", "0.160", "1.25")])
        # Async stall 20 ms over sync's 100 ms; a null paired overhead is a dash; 25 MiB.
        self.assertEqual(table_rows(section(page, "checkpoint_stall")), [
            ["small", "10", "sync", "100.0", "1.00", "40.0", "2.50", "1.25", "5.0", "7.5", "25.0"],
            ["small", "10", "async", "20.0", "0.20", "40.0", "0.50", "1.25", "5.0", "-", "25.0"]])
        # Rows sorted by op, then size; braid busbw over raw MPI's.
        coll = section(page, "collectives")
        np2 = coll[coll.index("### collectives_np2.json"):coll.index("### collectives_np4.json")]
        self.assertEqual(table_rows(np2), [
            ["all_gather", "4096", "200.0", "100.0", "0.900", "1.200", "0.75"],
            ["all_reduce", "4096", "200.0", "100.0", "0.500", "2.000", "0.25"],
            ["all_reduce", "8192", "200.0", "100.0", "1.000", "2.000", "0.50"]])
        self.assertEqual(table_rows(coll[coll.index("### collectives_np4.json"):]),
                         [["reduce_scatter", "65536", "50.0", "40.0", "0.800", "1.000", "0.80"]])
        self.assertEqual(table_rows(section(page, "dp_overlap")),
                         [["backward alone", "40.0"], ["buckets all-reduced alone", "20.0"],
                          ["backward with DDP", "45.0"], ["exposed communication", "5.0"]])
        self.assertIn("2 ranks, gradient buckets: 5; 75% of the all-reduce hidden behind the "
                      "backward.", section(page, "dp_overlap"))
        # Phases over the 500 ms step, in the step's order.
        self.assertEqual(table_rows(section(page, "gpt_step_bench")), [
            ["zero_grad", "5.0", "1.0%"], ["forward", "125.0", "25.0%"],
            ["backward", "300.0", "60.0%"], ["grad_norm", "20.0", "4.0%"],
            ["adamw", "50.0", "10.0%"], ["step", "500.0", "100.0%"]])
        # Medians of the repetitions only; bytes/s in GB/s, the FLOP/s counter in GFLOP/s.
        self.assertEqual(table_rows(section(page, "micro")), [
            ["BM_AdamW/124475904/real_time", "3", "65.000", "ms", "50.00", "-"],
            ["BM_MatmulOp/256/768/3072/real_time", "3", "6.800", "ms", "-", "180.0"],
            ["BM_Memcpy/124475904/real_time", "3", "30.000", "ms", "33.20", "-"]])
        self.assertNotIn("## Not measured yet", page)

    def test_each_result_shows_its_command_date_and_machine(self):
        self.copy_fixtures()
        tp = section(self.generate(), "tp_step")
        self.assertIn("Command: `benchmarks/tp_bench.sh --rounds 2`. Date: 2026-01-02T03:04:05Z. "
                      "Machine: fixture-host, Fixture CPU 9000, 2 threads.", tp)

    def test_benchmarks_without_results_are_listed_with_their_commands(self):
        self.copy_fixtures({"cpu_vs_torch.json", "collectives_np2.json"})
        page = self.generate()
        lines = section(page, "Not measured yet")
        self.assertEqual([l for l in lines if l.startswith("- ")], [
            "- checkpoint_stall: `benchmarks/checkpoint_stall.sh --modes sync,async,overlapped "
            "--steps-124m 110 --after 8`",
            "- dp_overlap: `mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none "
            "build/benchmarks/dp_overlap --json "
            "benchmarks/results/dp_overlap.json`",
            "- gpt_step_bench: `build/benchmarks/gpt_step_bench --json "
            "benchmarks/results/gpt_step_bench.json`",
            "- micro: `build/benchmarks/braid_micro_bench --benchmark_out=benchmarks/results/"
            "micro.json --benchmark_out_format=json`",
            "- pipeline_bubble: `mpirun -np 4 --oversubscribe --allow-run-as-root --bind-to none "
            "build/benchmarks/pipeline_bubble --out "
            "benchmarks/results`",
            "- tp_step: `benchmarks/tp_bench.sh`"])
        self.assertIn("`collectives_np4.json`: not measured yet.", section(page, "collectives"))
        self.assertNotIn("## tp_step", page)

    def test_missing_run_fields_are_named_not_invented(self):
        self.copy_fixtures()
        self.edit_fixture("tp_step.json", lambda d: (d.pop("command"), d.pop("host")))
        r = run("--results", self.results, "--out", self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("tp_step.json: missing fields 'command', 'host'", r.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_missing_run_field_of_google_benchmark_context(self):
        self.copy_fixtures({"micro.json"})
        self.edit_fixture("micro.json", lambda d: d["context"].pop("threads"))
        r = run("--results", self.results, "--out", self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("micro.json: missing field 'threads'", r.stderr)

    def test_missing_result_field_is_named_with_its_path(self):
        self.copy_fixtures()
        self.edit_fixture("cpu_vs_torch.json",
                          lambda d: d["configs"]["a"]["braid"].pop("tokens_per_s"))
        r = run("--results", self.results, "--out", self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cpu_vs_torch.json: configs.a.braid: missing field 'tokens_per_s'", r.stderr)

    def test_a_file_no_benchmark_writes_is_an_error(self):
        self.copy_fixtures({"tp_step.json"})
        shutil.copy(os.path.join(FIXTURES, "tp_step.json"), os.path.join(self.results, "tp.json"))
        r = run("--results", self.results, "--out", self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("tp.json: not a result file of any benchmark", r.stderr)

    def test_check_passes_on_a_fresh_page_and_fails_on_a_changed_one(self):
        self.copy_fixtures()
        page = self.generate()
        self.assertEqual(self.generate(), page)  # deterministic
        r = run("--results", self.results, "--out", self.out, "--check")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.out, "w") as f:
            f.write(page.replace("| 3.00 |", "| 3.10 |"))
        r = run("--results", self.results, "--out", self.out, "--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("is stale", r.stderr)
        self.assertIn("'| a | L=12", r.stderr)  # the differing line
        # A changed result makes the page stale too, and --check writes nothing.
        self.generate()
        self.edit_fixture("tp_step.json", lambda d: d["layouts"]["tp2"].update(step_ms_median=70.0))
        r = run("--results", self.results, "--out", self.out, "--check")
        self.assertEqual(r.returncode, 1)
        with open(self.out) as f:
            self.assertEqual(f.read(), page)

    def test_check_fails_without_a_page(self):
        self.copy_fixtures({"tp_step.json"})
        r = run("--results", self.results, "--out", self.out, "--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not exist", r.stderr)


if __name__ == "__main__":
    unittest.main()
