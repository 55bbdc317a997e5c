#!/usr/bin/env python3
"""gpu_summary.py's summary.json from a results folder shaped as run.sh leaves it: stage records,
a JUnit report, the benches' JSON (the fields bench/train_gpu.cpp and bench/conv_gpu.cpp write)
and a simulation; the figures are computed from them, and errors are found in the logs."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_summary  # noqa: E402


def write(path, obj):
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))


class SummaryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.work = os.path.join(self.tmp.name, "work")
        self.out = os.path.join(self.tmp.name, "out")
        os.makedirs(os.path.join(self.work, "logs"))
        os.makedirs(self.out)

    def tearDown(self):
        self.tmp.cleanup()

    def test_figures_and_stages(self):
        w = self.work
        bench = lambda ms, peak, prec: {  # noqa: E731
            "input": "3x512x2048", "batch": 2, "precision": prec,
            "tessera": {"step_ms_median": ms, "peak_total_mib": peak, "peak_reserved_mib": peak + 10},
            "torch": {"torch_version": "2.11", "cuda": "13.0", "cudnn": 91000, "precision": prec},
            "tessera_over_torch": {"step_time": 1.25}}
        write(f"{w}/bench_train_fp32.json", bench(200.0, 4000.0, "fp32"))
        write(f"{w}/bench_train_bf16.json", bench(120.0, 2500.0, "bf16"))
        write(f"{w}/sim_run.json", {"iteration_time_s": 0.18})
        write(f"{w}/bench_conv.json", {"copy_bandwidth": {"gb_per_s": 3000.0}, "results": [
            {"layer": "dw7x7_p3", "pass": "fwd+bwd", "ms_median": 0.5, "gb_per_s": 2400.0,
             "share_of_copy_bw": 0.8, "tessera_over_torch": 0.9}]})
        write(f"{w}/t.xml", '<testsuites><testsuite name="t" tests="3" failures="1" errors="0">'
              '<testcase name="a"/><testcase name="b"><failure message="x != y"/></testcase>'
              '<testcase name="c"/></testsuite></testsuites>')
        write(f"{w}/logs/bench.log", "training...\ncuda: cudnnConvolutionForward failed: BAD_PARAM\n")
        write(f"{w}/stages.jsonl", "\n".join(json.dumps(r) for r in (
            {"name": "conformance", "status": "failed", "rc": 1, "seconds": 3, "cap_s": 45,
             "note": "", "log": "logs/conformance.log", "junit": "t.xml"},
            {"name": "bench", "status": "failed", "rc": 1, "seconds": 3, "cap_s": 55, "note": "",
             "log": "logs/bench.log"})) + "\n")
        write(f"{w}/run.json", {"started_utc": "x", "started_epoch": 0, "caps_total_s": 420,
                                "exit_status": 1, "verdict": "a stage failed"})
        self.assertEqual(gpu_summary.write(w, self.out), 0)
        s = json.load(open(f"{self.out}/summary.json"))
        fig = s["figures"]
        self.assertAlmostEqual(fig["sim_convnext-t"]["sim_error"], (180.0 - 200.0) / 200.0)
        self.assertAlmostEqual(fig["convnext-t_bf16"]["bf16_over_fp32_step"], 0.6)
        self.assertAlmostEqual(fig["convnext-t_bf16"]["bf16_over_fp32_peak"], 0.625)
        self.assertEqual(fig["convnext-t_bf16"]["peer"]["precision"], "bf16")
        self.assertEqual(fig["dw7x7_fwd_bwd"]["copy_gb_per_s"], 3000.0)
        st = {x["name"]: x for x in s["stages"]}
        self.assertEqual(st["conformance"]["tests"]["failures"], 1)
        self.assertIn("b: x != y", st["conformance"]["tests"]["first_failure"])
        self.assertIn("BAD_PARAM", st["bench"]["first_error"])
        self.assertEqual(os.listdir(self.out), ["summary.json"])  # written atomically, no leftovers

    def test_console_counts(self):
        log = f"{self.work}/logs/c.log"
        write(log, "0.5 s: a\n=====\ntest cases: 5 | 5 passed\nassertions: - none -\n")
        self.assertEqual(gpu_summary.console_counts(log), {"tests": 5, "failures": 0})
        write(log, "x.cpp:3: FAILED:\n  REQUIRE( a == b )\n=====\n"
              "test cases: 4 | 3 passed | 1 failed\nassertions: 9 | 8 passed | 1 failed\n")
        c = gpu_summary.console_counts(log)
        self.assertEqual((c["tests"], c["failures"]), (4, 1))
        self.assertIn("FAILED", c["first_failure"])
        write(log, "All tests passed (12 assertions in 3 test cases)\n")
        self.assertEqual(gpu_summary.console_counts(log), {"tests": 3, "failures": 0})
        write(log, "0.5 s: a\n1.0 s: b\n")  # cut at its cap: how far it got
        self.assertEqual(gpu_summary.console_counts(log)["finished"], 2)

    def test_error_lines_ignore_words_inside_names(self):
        write(f"{self.work}/logs/x.log",
              "nccl built, cudaErrorInsufficientDriver (driver too old)\n"
              "tessera backends: required backend 'cuda' does not load: libcudnn.so.9 missing\n")
        self.assertIn("does not load", gpu_summary.first_error(f"{self.work}/logs/x.log"))
        write(f"{self.work}/logs/y.log", "bench_train: cuda: built, no CUDA device visible\n\n")
        self.assertIn("no CUDA device", gpu_summary.first_error(f"{self.work}/logs/y.log"))


if __name__ == "__main__":
    unittest.main()
