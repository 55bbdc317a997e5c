#!/usr/bin/env python3
"""The GPU check's bookkeeping (tests/gpu/README.md), beside run.sh in the bundle:

  gpu_summary.py probe BUNDLE WORK     the machine in a few seconds: CPU flags against the
                                       bundle's, glibc, driver and GPUs (nvidia-smi), Python,
                                       torch's version (not imported: too slow), the folders of
                                       NVIDIA's wheels; writes WORK/probe.json and prints the
                                       library path run.sh puts on LD_LIBRARY_PATH
  gpu_summary.py write WORK OUT        OUT/summary.json from WORK/stages.jsonl and the stages'
                                       files, written atomically (run.sh calls it after every
                                       stage)
"""
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET


def _run(cmd, timeout=3):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout.strip(), p.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, "", str(e)


def _site_packages():
    import site
    import sysconfig
    dirs = set(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    dirs.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else "")
    for k in ("purelib", "platlib"):
        dirs.add(sysconfig.get_paths().get(k, ""))
    return sorted(d for d in dirs if d and os.path.isdir(d))


def library_dirs():
    """NVIDIA's wheels first (nvidia/*/lib, nvidia/cu13/lib, ...), then the CUDA toolkit's
    folders: each that holds a shared library, once (by its real path)."""
    found = []
    candidates = []
    for sp in _site_packages():
        for pattern in ("nvidia/*/lib", "nvidia/*/lib64", "nvidia/lib"):
            candidates += sorted(glob.glob(os.path.join(sp, pattern)))
    candidates += ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                   "/usr/local/cuda/lib"]
    for d in candidates:
        d = os.path.realpath(d)
        if os.path.isdir(d) and glob.glob(os.path.join(d, "lib*.so*")) and d not in found:
            found.append(d)
    return found


def probe(bundle, work):
    t0 = time.time()
    p = {"host": platform.node(), "kernel": platform.release(), "python": platform.python_version()}
    try:
        with open(os.path.join(bundle, "manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        manifest = {}
        p["manifest_error"] = str(e)
    p["bundle_commit"] = manifest.get("commit")
    cpu_flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    cpu_flags = set(line.split(":", 1)[1].split())
                elif line.startswith("model name") and "cpu" not in p:
                    p["cpu"] = line.split(":", 1)[1].strip()
    except OSError:
        pass
    p["cpu_cores"] = os.cpu_count()
    needed = manifest.get("cpu_flags_needed", [])
    p["cpu_flags_missing"] = [f for f in needed if cpu_flags and f not in cpu_flags]
    p["glibc"] = platform.libc_ver()[1]
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1")
    # The driver's own list, instant and without initialising anything, decides whether the GPU
    # stages run; nvidia-smi (whose first call can take seconds while the driver wakes up) only
    # adds the names. probe.json and the library path are written first, so a probe cut at its
    # 5 s still leaves both.
    p["driver_gpus"] = sorted(os.path.basename(d) for d in glob.glob("/proc/driver/nvidia/gpus/*"))
    p["device_files"] = sorted(d for d in glob.glob("/dev/nvidia[0-9]*"))
    p["gpu_visible"] = bool(p["driver_gpus"] or p["device_files"]) and not hidden
    p["library_dirs"] = library_dirs()
    p["compute_sanitizer"] = shutil.which("compute-sanitizer") or (
        "/usr/local/cuda/bin/compute-sanitizer"
        if os.path.exists("/usr/local/cuda/bin/compute-sanitizer") else None)
    try:
        from importlib import metadata
        p["torch"] = metadata.version("torch")
    except Exception as e:  # no torch: the peers will say so
        p["torch"] = None
        p["torch_error"] = str(e)

    def dump():
        p["seconds"] = round(time.time() - t0, 2)
        tmp = os.path.join(work, ".probe.json.tmp")
        with open(tmp, "w") as f:
            json.dump(p, f, indent=1)
        os.replace(tmp, os.path.join(work, "probe.json"))

    dump()
    print(":".join(p["library_dirs"]), flush=True)
    p["gpus"] = []
    smi = shutil.which("nvidia-smi")
    if smi:
        rc, out, err = _run([smi, "--query-gpu=index,name,driver_version,memory.total,compute_cap",
                             "--format=csv,noheader"], timeout=3.5)
        if rc == 0:
            for line in out.splitlines():
                f = [x.strip() for x in line.split(",")]
                if len(f) >= 4:
                    p["gpus"].append({"index": f[0], "name": f[1], "driver": f[2], "memory": f[3],
                                      "compute_cap": f[4] if len(f) > 4 else None})
        else:
            p["nvidia_smi_error"] = (err or out)[:300]
    else:
        p["nvidia_smi_error"] = "nvidia-smi not found"
    p["gpu_visible"] = p["gpu_visible"] or (bool(p["gpus"]) and not hidden)
    dump()
    return 0


# ---- summary.json ------------------------------------------------------------------------------

def _load(work, name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


_CONSOLE_ALL = re.compile(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)")
_CONSOLE_SOME = re.compile(r"test cases:\s+(\d+)(?: \|\s+(\d+) passed)?(?: \|\s+(\d+) failed)?")


def console_counts(log):
    """tests and failures from a Catch2 console run's last summary line, the first failing case."""
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    r = None
    m = _CONSOLE_ALL.findall(text)
    if m:
        r = {"tests": int(m[-1][1]), "failures": 0}
    m2 = _CONSOLE_SOME.findall(text)
    if m2 and (r is None or text.rfind("test cases:") > text.rfind("All tests passed")):
        r = {"tests": int(m2[-1][0]), "failures": int(m2[-1][2] or 0)}
    if r is None:
        return {"error": "no Catch2 summary line (cut short?)",
                "finished": len(re.findall(r"^\d+\.\d+ s: ", text, re.M))}
    at = text.find("FAILED:")
    if r["failures"] and at >= 0:  # from the case's name (lines above) to the failed check's text
        start = max(0, text.rfind("\n", 0, max(0, text.rfind("\n", 0, at) - 1)))
        r["first_failure"] = text[start:at + 300].strip()[:400]
    return r


def junit_counts(path):
    """tests, failures, errors and the first failure's message of a Catch2 JUnit report."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        return {"error": f"no JUnit report ({e.__class__.__name__})"}
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    r = {"tests": 0, "failures": 0, "errors": 0}
    first = None
    for s in suites:
        for k in r:
            r[k] += int(s.get(k, 0) or 0)
        for case in s.iter("testcase"):
            for bad in list(case.findall("failure")) + list(case.findall("error")):
                if first is None:
                    first = f"{case.get('name')}: {(bad.get('message') or bad.text or '').strip()[:300]}"
    if first:
        r["first_failure"] = first
    return r


_ERROR_LINE = re.compile(r"\b(error|failed|unsupported|terminate called|what\(\)|no such file|"
                         r"not found|cannot|does not load|segmentation fault|aborted|"
                         r"TESSERA_TEST_SKIPPED)\b", re.IGNORECASE)


def first_error(log):
    """The first line of `log` that reads as an error, else its last non-empty line."""
    last = None
    try:
        with open(log, errors="replace") as f:
            for line in f:
                if _ERROR_LINE.search(line):
                    return line.strip()[:300]
                if line.strip():
                    last = line.strip()[:300]
    except OSError:
        pass
    return last


def figures(work):
    fig = {}
    fp32 = _load(work, "bench_train_fp32.json") or {}
    bf16 = _load(work, "bench_train_bf16.json") or {}
    for key, b in (("convnext-t_fp32", fp32), ("convnext-t_bf16", bf16)):
        if not b:
            continue
        t = b.get("tessera") or {}
        fig[key] = {"input": b.get("input"), "batch": b.get("batch"),
                    "precision": b.get("precision", "fp32" if key.endswith("fp32") else None),
                    "tessera_step_ms": t.get("step_ms_median"),
                    "tessera_peak_mib": t.get("peak_total_mib"),
                    "tessera_reserved_mib": t.get("peak_reserved_mib"),
                    "tessera_over_torch": b.get("tessera_over_torch"),
                    "peer": b.get("peer") or {k: (b.get("torch") or {}).get(k) for k in
                                              ("torch_version", "cuda", "cudnn", "precision")}}
    a, b = fig.get("convnext-t_fp32", {}), fig.get("convnext-t_bf16", {})
    if a.get("tessera_step_ms") and b.get("tessera_step_ms"):
        b["bf16_over_fp32_step"] = b["tessera_step_ms"] / a["tessera_step_ms"]
    if a.get("tessera_peak_mib") and b.get("tessera_peak_mib"):
        b["bf16_over_fp32_peak"] = b["tessera_peak_mib"] / a["tessera_peak_mib"]
    conv = _load(work, "bench_conv.json") or {}
    for r in conv.get("results", []):
        if r.get("layer") == "dw7x7_p3" and r.get("pass") == "fwd+bwd":
            d = {k: r.get(k) for k in ("ms_median", "gb_per_s", "share_of_copy_bw", "tessera_over_torch")}
            d["copy_gb_per_s"] = (conv.get("copy_bandwidth") or {}).get("gb_per_s")
            fig["dw7x7_fwd_bwd"] = d
    sim = _load(work, "sim_run.json") or {}
    if "iteration_time_s" in sim:
        s = {"sim_step_ms": 1e3 * sim["iteration_time_s"]}
        m = a.get("tessera_step_ms")
        if m:
            s["measured_step_ms"] = m
            s["sim_error"] = (s["sim_step_ms"] - m) / m  # > 0: the simulator predicts slower
        fig["sim_convnext-t"] = s
    return fig


def write(work, out):
    stages = []
    try:
        with open(os.path.join(work, "stages.jsonl")) as f:
            stages = [json.loads(line) for line in f if line.strip()]
    except OSError:
        pass
    for s in stages:
        if s.get("junit"):
            s["tests"] = junit_counts(os.path.join(work, s["junit"]))
        elif s.get("tests_in_log"):
            s["tests"] = console_counts(os.path.join(work, "logs", s["name"] + ".log"))
        if s["status"] not in ("ok", "not-run") and not s.get("first_error"):
            s["first_error"] = first_error(os.path.join(work, "logs", s["name"] + ".log"))
    meta = _load(work, "run.json") or {}
    summary = {
        "script": "gpu-bundle/run.sh",
        "started_utc": meta.get("started_utc"),
        "elapsed_s": round(time.time() - meta.get("started_epoch", time.time()), 1),
        "caps_total_s": meta.get("caps_total_s"),
        "exit_status": meta.get("exit_status"),
        "verdict": meta.get("verdict"),
        "probe": _load(work, "probe.json"),
        "closure": _load(work, "closure.json"),
        "stages": stages,
        "figures": figures(work),
    }
    tmp = os.path.join(out, ".summary.json.tmp")
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(out, "summary.json"))
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "probe":
        return probe(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "write":
        return write(argv[2], argv[3])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
