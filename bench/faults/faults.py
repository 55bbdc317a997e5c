#!/usr/bin/env python3
"""The fault table: every fault of issue 20 injected into a 2-rank ucx job, measured.

    bench/faults/faults.sh <tessera binary> [--json] [--reps 3] [--timeout 5] [--only NAME,...]

Each scenario runs `tessera launch --nproc 2 -- train ... --backend ucx` (or two launchers,
--nnodes 2, where a second store client or a second token is the point) on convnext-mini,
3x32x128, mesh sp=2, one thread per rank, --timeout 5 s. Faults inside a rank come from
TESSERA_FAULT (docs/launching.md, "Faults"), which logs the wall-clock time of the injection;
the others are done by this program, which notes the time itself. Measured, per repetition:
"detected" = injection -> the first output line of any rank or launcher that reports an error;
"stopped" = injection -> the last launcher has exited and no rank process is left. Before the
scenarios a short run writes a good checkpoint to the --save path every faulty run also names;
after each run its sha256 must be unchanged and no temporary file may lie beside it, and after
each scenario `tessera train --resume` (the local backend, no step run) must load it.
"""
import argparse
import ctypes
import hashlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import elastic_cases

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
ERROR = re.compile(r"error|fail|abort|timed out|never arrived|refused|lost|reset|no space|closed", re.I)
INJECTED = re.compile(r"TESSERA_FAULT=\S+: rank (\d+): .*\(unix time ([0-9.]+)\)")
STEPS_FAULTY = 8      # a faulty run's --steps (its fault comes at step 3)
STEPS_GOOD = 2        # the good checkpoint's step
HUNG_S = 90           # a run still going after this long is killed and reported as hung
ELASTIC = {"elastic-kill", "elastic-stall", "elastic-add"}  # elastic_cases.py's


def model_args(timeout_s):
    return ["--model", os.path.join(SRC, "examples/convnext-mini.json"), "--classes", "6", "--threads", "1",
            "--batch", "2", "--input", "3x32x128", "--mesh", "sp=2", "--timeout", str(timeout_s)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def describe_code(rc):
    if rc is None:
        return "?"
    return f"signal {-rc} ({signal.Signals(-rc).name})" if rc < 0 else str(rc)


class Job:
    """One run: launchers started together (or the second after the first's store is up), their
    merged output read line by line with the time each line arrived."""

    def __init__(self, launchers, on_line=None, delay_s=None):
        self.specs = launchers            # [(argv, env)]
        self.on_line = on_line            # f(job, t, launcher, text)
        self.delay_s = delay_s or [0] * len(launchers)
        self.lines = []                   # (t, launcher, text)
        self.rank_pids = {}               # rank -> pid (from "[launch] rank r pid p")
        self.rank_status = {}             # rank -> wait status, for ranks orphaned to us
        self.procs = []
        self.t_start = None
        self.hung = False

    def start_one(self, i):
        argv, env = self.specs[i]
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.procs.append(p)
        self.sel.register(p.stdout, selectors.EVENT_READ, (i, bytearray()))

    def kill_launcher(self, i):
        os.kill(self.procs[i].pid, signal.SIGKILL)

    def run(self):
        self.sel = selectors.DefaultSelector()
        self.t_start = time.time()
        self.start_one(0)
        open_pipes = 1
        deadline = time.time() + HUNG_S
        while open_pipes or any(p.poll() is None for p in self.procs):
            if len(self.procs) < len(self.specs) and time.time() >= self.t_start + self.delay_s[len(self.procs)]:
                self.start_one(len(self.procs))
                open_pipes += 1
                continue
            if time.time() > deadline and not self.hung:
                self.hung = True
                for p in self.procs:
                    if p.poll() is None:
                        p.kill()
                self.kill_ranks()
            for key, _ in self.sel.select(0.05):
                i, buf = key.data
                chunk = os.read(key.fileobj.fileno(), 65536)
                now = time.time()
                if not chunk:
                    if buf:
                        self.line(now, i, buf.decode(errors="replace"))
                    self.sel.unregister(key.fileobj)
                    key.fileobj.close()
                    open_pipes -= 1
                    continue
                buf += chunk
                while b"\n" in buf:
                    nl = buf.index(b"\n")
                    self.line(now, i, buf[:nl].decode(errors="replace"))
                    del buf[:nl + 1]
        self.t_launchers_done = time.time()
        self.t_ranks_gone = self.wait_ranks()
        return self

    def line(self, t, i, text):
        self.lines.append((t, i, text))
        m = re.match(r"\[launch\] rank (\d+) pid (\d+)$", text)
        if m:
            self.rank_pids[int(m.group(1))] = int(m.group(2))
        if self.on_line:
            self.on_line(self, t, i, text)

    def alive(self, rank):
        pid = self.rank_pids[rank]
        if rank in self.rank_status:
            return False
        try:  # an orphaned rank is our child (we are a subreaper): reap it and keep its status
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                self.rank_status[rank] = status
                return False
            return True
        except ChildProcessError:
            pass
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def kill_ranks(self):
        for r, pid in self.rank_pids.items():
            if self.alive(r):
                os.kill(pid, signal.SIGKILL)

    def wait_ranks(self, grace_s=30):
        """When the last rank process was gone; ranks still alive after grace_s are killed."""
        end = time.time() + grace_s
        while time.time() < end:
            if not any(self.alive(r) for r in self.rank_pids):
                return time.time()
            time.sleep(0.02)
        self.left_running = sorted(r for r in self.rank_pids if self.alive(r))
        self.kill_ranks()
        time.sleep(0.2)
        for r in self.rank_pids:
            self.alive(r)
        return None

    left_running = []


def first_lines(job, names):
    """The first error line of every launcher and rank (the injection line for the faulty rank),
    and its last one when that differs (a launcher's summary, a rank's `tessera: error:`)."""
    out = {}
    for i, name in enumerate(names):
        own = [t for _, l, t in job.lines if l == i and not t.startswith("[rank ")]
        own = [t for t in own if not re.match(r"\[launch\] rank \d+ pid \d+$", t)]
        err = [t for t in own if ERROR.search(t)]
        out[name] = list(dict.fromkeys([err[0], err[-1]])) if err else \
            [f"(no error line; last: {own[-1]})" if own else "(no line of its own)"]
    for r in sorted(job.rank_pids):
        mine = [t.split("] ", 1)[1] for _, _, t in job.lines if t.startswith(f"[rank {r}] ")]
        err = [t for t in mine if ERROR.search(t) or INJECTED.search(t)]
        final = [t for t in err if t.startswith("tessera: error:")]
        if err:
            out[f"rank {r}"] = list(dict.fromkeys([err[0]] + final[-1:]))
        elif r in job.rank_status:
            st = job.rank_status[r]
            how = f"signal {os.WTERMSIG(st)} ({signal.Signals(os.WTERMSIG(st)).name})" if os.WIFSIGNALED(st) \
                else f"exit code {os.WEXITSTATUS(st)}"
            out[f"rank {r}"] = [f"(nothing reached a reader: its launcher was gone; it ended with {how})"]
        else:
            out[f"rank {r}"] = [f"(no error line; last: {mine[-1]})" if mine else "(no output)"]
    return out


def detection(job, t0):
    """Seconds from t0 to the first error line (not the injection's own lines), and to the end."""
    errs = [t for t, _, text in job.lines
            if ERROR.search(text) and "TESSERA_FAULT" not in text]
    detected = min(errs) - t0 if errs else None
    stopped = (job.t_ranks_gone - t0) if job.t_ranks_gone else None
    return detected, stopped


def injected_at(job):
    for _, _, text in job.lines:
        m = INJECTED.search(text)
        if m:
            return float(m.group(2))
    return None


class Bench:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.tessera)
        self.tmp = tempfile.mkdtemp(prefix="tessera-faults-")
        self.ckdir = os.path.join(self.tmp, "ckpt")
        os.makedirs(self.ckdir)
        self.ckpt = os.path.join(self.ckdir, "model.ckpt")
        self.env = dict(os.environ, UCX_WARN_UNUSED_ENV_VARS="n")
        self.env.pop("TESSERA_FAULT", None)
        self.mounted = None

    def launch(self, extra, env=None, nproc=2, node=None, port=None):
        argv = [self.bin, "launch", "--nproc", str(nproc)]
        if node is not None:
            argv += ["--nnodes", "2", "--node-rank", str(node), "--rdzv-endpoint", f"127.0.0.1:{port}"]
        argv += ["--", "train"] + model_args(self.a.timeout) + ["--backend", "ucx"] + extra
        return argv, dict(self.env, **(env or {}))

    def write_good(self, path):
        argv, env = self.launch(["--steps", str(STEPS_GOOD), "--save", path])
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=HUNG_S)
        if r.returncode != 0:
            sys.exit(f"faults: the good run failed:\n{r.stdout}{r.stderr}")

    def checkpoint_state(self, path, good_sha):
        d = os.path.dirname(path)
        temps = sorted(f for f in os.listdir(d) if f != os.path.basename(path))
        same = os.path.exists(path) and sha256(path) == good_sha
        return same, temps

    def loads(self, path):
        argv = [self.bin, "train"] + model_args(self.a.timeout) + ["--resume", path, "--steps", str(STEPS_GOOD)]
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=HUNG_S)
        return r.returncode == 0 and "no steps were run" in (r.stdout + r.stderr), (r.stdout + r.stderr).strip()

    # --- the scenarios: each returns (job, t0, launcher names) for one repetition ---------------

    def in_rank(self, fault, env=None):
        def run():
            job = Job([self.launch(["--steps", str(STEPS_FAULTY), "--save", self.ckpt],
                                   dict({"TESSERA_FAULT": fault}, **(env or {})))]).run()
            return job, injected_at(job), ["launcher"]
        return run

    def launcher_killed(self):
        def on_line(job, t, i, text):
            if not hasattr(job, "t_kill") and re.match(r"\[rank 0\] step 3/", text):
                job.kill_launcher(0)
                job.t_kill = time.time()

        def run():
            job = Job([self.launch(["--steps", "100000", "--save", self.ckpt])], on_line).run()
            return job, getattr(job, "t_kill", None), ["launcher"]
        return run

    def store_killed(self):
        def on_line(job, t, i, text):
            if not hasattr(job, "t_kill") and i == 0 and re.match(r"\[rank 0\] step 3/", text):
                job.kill_launcher(0)
                job.t_kill = time.time()

        def run():
            port = free_port()
            env = {"TESSERA_RDZV_TOKEN": "faults-" + os.urandom(8).hex()}
            ls = [self.launch(["--steps", "100000", "--save", self.ckpt], env, 1, 0, port),
                  self.launch(["--steps", "100000", "--save", self.ckpt], env, 1, 1, port)]
            job = Job(ls, on_line, [0, 0.3]).run()
            return job, getattr(job, "t_kill", None), ["launcher 0 (store)", "launcher 1"]
        return run

    def wrong_token(self):
        def run():
            port = free_port()
            ls = [self.launch(["--steps", str(STEPS_FAULTY), "--save", self.ckpt], {"TESSERA_RDZV_TOKEN": "right"}, 1, 0, port),
                  self.launch(["--steps", str(STEPS_FAULTY), "--save", self.ckpt], {"TESSERA_RDZV_TOKEN": "wrong"}, 1, 1, port)]
            job = Job(ls, None, [0, 0.3]).run()
            return job, job.t_start + 0.3, ["launcher 0 (store)", "launcher 1 (wrong token)"]
        return run

    def corrupt(self):
        bad = os.path.join(self.tmp, "corrupt.ckpt")
        shutil.copyfile(self.ckpt, bad)
        with open(bad, "r+b") as f:
            size = os.path.getsize(bad)
            f.seek(size // 2)
            b = bytearray(f.read(16))
            f.seek(size // 2)
            f.write(bytes(x ^ 0xFF for x in b))

        def run():
            job = Job([self.launch(["--resume", bad, "--steps", str(STEPS_FAULTY), "--save", self.ckpt])]).run()
            return job, job.t_start, ["launcher"]
        return run

    def disk_full(self):
        """The checkpoint folder on a tmpfs that holds the good checkpoint and half another."""
        size = os.path.getsize(self.ckpt)
        full = os.path.join(self.tmp, "full")
        os.makedirs(full)
        how = "ENOSPC: tmpfs of %d KiB holding the %d KiB checkpoint" % ((size * 3 // 2) // 1024, size // 1024)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size * 3 // 2}", "tmpfs", full],
                           capture_output=True, text=True)
        limit = None
        if r.returncode == 0:
            self.mounted = full
        else:  # RLIMIT_FSIZE: the write gets EFBIG (SIGXFSZ ignored) instead of ENOSPC
            how = f"mount not permitted ({r.stderr.strip()}); EFBIG via RLIMIT_FSIZE {size // 2} bytes instead"
            limit = size // 2
        ck = os.path.join(full, "model.ckpt")
        shutil.copyfile(self.ckpt, ck)

        def on_line(job, t, i, text):
            if re.match(rf"\[rank 0\] step {STEPS_GOOD}/{STEPS_GOOD}\b", text):
                job.t_saving = t

        def run():
            argv, env = self.launch(["--steps", str(STEPS_GOOD), "--save", ck])
            if limit:
                argv = ["bash", "-c", f"trap '' XFSZ; ulimit -f {limit // 512}; exec \"$@\"", "-"] + argv
            job = Job([(argv, env)], on_line).run()
            return job, getattr(job, "t_saving", None), ["launcher"]
        return run, ck, how

    # --- driver ------------------------------------------------------------------------------------

    def scenarios(self):
        tcp = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"}
        s = [
            ("kill-forward", "rank 1 killed in forward", "TESSERA_FAULT=kill:forward:step=3:rank=1",
             self.in_rank("kill:forward:step=3:rank=1")),
            ("kill-allreduce", "rank 1 killed in a gradient all-reduce", "TESSERA_FAULT=kill:allreduce:step=3:rank=1",
             self.in_rank("kill:allreduce:step=3:rank=1")),
            ("kill-halo", "rank 1 killed in a backward halo exchange", "TESSERA_FAULT=kill:halo:step=3:rank=1",
             self.in_rank("kill:halo:step=3:rank=1")),
            ("stall", "rank 1 stalled (SIGSTOP) in forward", "TESSERA_FAULT=stall:forward:step=3:rank=1",
             self.in_rank("stall:forward:step=3:rank=1")),
            ("launcher-killed", "the store killed: SIGKILL to `tessera launch --nproc 2` (it serves the store)",
             "kill -9 <launcher> at step 3", self.launcher_killed()),
            ("store-killed", "the store killed: SIGKILL to launcher 0 of --nnodes 2 (store + rank 0); rank 1 under launcher 1",
             "kill -9 <launcher 0> at step 3", self.store_killed()),
            ("partition", "network partition: rank 1 drops every TCP connection (UCX over TCP on lo)",
             "TESSERA_FAULT=drop:allreduce:step=3:rank=1, UCX_TLS=tcp UCX_NET_DEVICES=lo",
             self.in_rank("drop:allreduce:step=3:rank=1", tcp)),
        ]
        s.append(("corrupt", "corrupted checkpoint (16 bytes flipped mid-file) given to --resume",
                  "--resume <corrupt copy>", self.corrupt()))
        s.append(("wrong-token", "a rank joins with another TESSERA_RDZV_TOKEN (--nnodes 2, node 1 wrong)",
                  "TESSERA_RDZV_TOKEN differs on node 1", self.wrong_token()))
        return s

    def run(self):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphaned ranks come to us
        only = set(self.a.only.split(",")) if self.a.only else None
        results = [] if only and only <= ELASTIC else self.run_faults(only)
        self.elastic = elastic_cases.Elastic(self).run(only)
        return results

    def run_faults(self, only):
        self.write_good(self.ckpt)
        good_sha = sha256(self.ckpt)
        results = []
        scen = self.scenarios()
        run_full, ck_full, how_full = self.disk_full()
        scen.append(("disk-full", "disk full while checkpointing (--save on a full filesystem)", how_full, run_full))
        for name, what, how, run in scen:
            if only and name not in only:
                continue
            ck = ck_full if name == "disk-full" else self.ckpt
            reps = []
            for _ in range(self.a.reps):
                job, t0, names = run()
                if self.a.logs:
                    os.makedirs(self.a.logs, exist_ok=True)
                    with open(os.path.join(self.a.logs, f"{name}.{len(reps)}.log"), "w") as f:
                        for t, i, text in job.lines:
                            f.write(f"{t - (t0 or job.t_start):+9.3f} L{i} {text}\n")
                det, stop = detection(job, t0) if t0 else (None, None)
                same, temps = self.checkpoint_state(ck, good_sha)
                reps.append({"job": job, "t0": t0, "names": names, "detected_s": det, "stopped_s": stop,
                             "exit": [describe_code(p.returncode) for p in job.procs], "hung": job.hung,
                             "left_running": job.left_running, "same": same, "temps": temps})
                print(f"faults: {name}: detected {det}, stopped {stop}, exit {reps[-1]['exit']}", file=sys.stderr)
            ok_load, load_out = self.loads(ck)
            results.append(self.summarise(name, what, how, reps, ok_load, load_out))
        return results

    def summarise(self, name, what, how, reps, ok_load, load_out):
        def stat(key):
            v = [r[key] for r in reps if r[key] is not None]
            if not v:
                return None
            return {"median": round(statistics.median(v), 3), "min": round(min(v), 3), "max": round(max(v), 3),
                    "n": len(v), "of": len(reps)}
        first = reps[0]
        return {
            "name": name, "fault": what, "how": how,
            "detected_s": stat("detected_s"), "stopped_s": stat("stopped_s"),
            "exit_codes": sorted({", ".join(r["exit"]) for r in reps}),
            "hung": any(r["hung"] for r in reps),
            "left_running": sorted({x for r in reps for x in r["left_running"]}),
            "first_lines": {k: [x.replace(self.tmp, "$tmp") for x in v]
                            for k, v in first_lines(first["job"], first["names"]).items()},
            "checkpoint": {"unchanged": all(r["same"] for r in reps),
                           "temporary_files": sorted({t for r in reps for t in r["temps"]}),
                           "loads": ok_load, "load_output": None if ok_load else load_out[-400:]},
        }

    def cleanup(self):
        if self.mounted:
            subprocess.run(["umount", self.mounted])
        shutil.rmtree(self.tmp, ignore_errors=True)


def fmt(s):
    if s is None:
        return "—"
    spread = f"{s['min']:.3f}–{s['max']:.3f}"
    miss = "" if s["n"] == s["of"] else f", {s['n']} of {s['of']}"
    return f"{s['median']:.3f} ({spread}{miss})"


def table(results, a, model):
    out = [f"tessera fault table: 2 ranks (tessera launch, ucx), convnext-mini 3x32x128 sp=2, --timeout {a.timeout} s, "
           f"launcher --grace 10 s (default), {a.reps} runs each; {model}", "",
           "| fault | injected by | detected, s | all stopped, s | exit code | checkpoint |",
           "|---|---|---|---|---|---|"]
    for r in results:
        c = r["checkpoint"]
        ck = ("intact, loads" if c["unchanged"] and c["loads"] else
              ("unchanged" if c["unchanged"] else "CHANGED") + ("" if c["loads"] else ", DOES NOT LOAD"))
        ck += "; no temp file" if not c["temporary_files"] else "; LEFT: " + " ".join(c["temporary_files"])
        extra = (" HUNG" if r["hung"] else "") + (f" (ranks {r['left_running']} left running)" if r["left_running"] else "")
        out.append(f"| {r['fault']} | `{r['how']}` | {fmt(r['detected_s'])} | {fmt(r['stopped_s'])}{extra} | "
                   f"{' / '.join(r['exit_codes'])} | {ck} |")
    out += ["", "First error line of each launcher and rank (first run):", ""]
    for r in results:
        out.append(f"- **{r['name']}**")
        for who, lines in r["first_lines"].items():
            out.append(f"  - {who}: " + " — then: ".join(f"`{x}`" for x in lines))
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tessera")
    p.add_argument("--json", action="store_true")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--timeout", type=float, default=5)
    p.add_argument("--only", default="", help="comma-separated scenario names (elastic-kill, elastic-stall, "
                                              "elastic-add: elastic_cases.py)")
    p.add_argument("--logs", default="", help="write every run's output to DIR/<scenario>.<run>.log")
    a = p.parse_args()
    model = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                  if l.startswith("Model name")), "?")
    b = Bench(a)
    try:
        results = b.run()
    finally:
        b.cleanup()
    if a.json:
        print(json.dumps({"machine": model, "cores": os.cpu_count(), "timeout_s": a.timeout, "reps": a.reps,
                          "date": time.strftime("%Y-%m-%d"), "scenarios": results, "elastic": b.elastic}, indent=1))
        return
    machine = f"{model}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}"
    if results:
        print(table(results, a, machine))
    if b.elastic:
        print(("\n" if results else "") + f"tessera elastic cases: convnext-mini 3x32x128 --mesh dp=auto --batch 6, "
              f"--save-every 2 --resume auto, --timeout {a.timeout} s unless named, {a.reps} runs each; {machine}\n")
        print(elastic_cases.table(b.elastic, fmt))


if __name__ == "__main__":
    main()
