"""The fault table's elastic cases (bench/faults/faults.sh --only elastic-kill,elastic-stall,elastic-add).

Each case runs an elastic job, `tessera launch --nproc 2:3` (kill, stall) or a leader of
`--nnodes 1:2 --nproc 2` joined by a member launcher (add), training convnext-mini 3x32x128 with
`--mesh dp=auto --batch 6 --save CK --save-every 2 --resume auto`, one thread per rank, and reads
the leader's --elastic-log. Measured per repetition, from the event (the TESSERA_FAULT line's
wall-clock stamp; for add, the moment the bench started the member launcher): "found" = to the
end of round 0 as the launcher logged it (ended_s); "started" = to the start of round 1's ranks
(its started_s); "first step" = to the first completed step of round 1 (its first_step_s); steps
and time lost as the launcher computed them (round 1's steps_lost and time_lost_s: time lost
counts from the end of round 0, so a stall's detection time is not in it). Then the by-hand sequence, once per resumed step: the first world
to the end with every checkpoint kept, its checkpoint at the step round 1 resumed from trained on
to the end on the second world, on ucx (launched) and on local (threads); the elastic run's
final checkpoint must equal it byte for byte (cmp).
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

STEPS_KILL = 8     # kill and stall: the fault at step 5, checkpoints every 2 steps
STEPS_ADD = 40     # add: long enough to be running when the member arrives after step 3
HUNG_S = 120
INJECTED = re.compile(r"TESSERA_FAULT=\S+: rank \d+: .*\(unix time ([0-9.]+)\)")
PORT = re.compile(r"^\[launch\] elastic job: .* --join [0-9.]+:(\d+) ")


def model(src):
    return ["--model", os.path.join(src, "examples/convnext-mini.json"), "--classes", "6", "--threads", "1",
            "--batch", "6", "--input", "3x32x128"]


class Run:
    """Launchers with their output read by threads, each line kept with its arrival time; `then`
    is called for every line of the first (and may start the second with start())."""

    def __init__(self, env, then=None):
        self.env, self.then = env, then
        self.lines, self.procs, self.threads = [], [], []
        self.lock = threading.Lock()

    def start(self, argv, env=None):
        p = subprocess.Popen(argv, env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        i = len(self.procs)
        self.procs.append(p)
        t = threading.Thread(target=self.read, args=(i, p), daemon=True)
        self.threads.append(t)
        t.start()
        return time.time()

    def read(self, i, p):
        for raw in p.stdout:
            text = raw.decode(errors="replace").rstrip("\n")
            with self.lock:
                self.lines.append((time.time(), i, text))
            if i == 0 and self.then:
                self.then(self, text)

    def wait(self):
        end = time.time() + HUNG_S
        for p in list(self.procs):
            try:
                p.wait(timeout=max(1, end - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for t in self.threads:
            t.join(timeout=5)
        return [p.returncode for p in self.procs]

    def text(self):
        return "\n".join(f"L{i} {t}" for _, i, t in self.lines)


class Elastic:
    def __init__(self, bench):
        self.b = bench
        self.src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.dir = os.path.join(bench.tmp, "elastic")
        os.makedirs(self.dir, exist_ok=True)
        self.by_hand_cache = {}

    def train(self, steps, extra):
        return ["--", "train"] + model(self.src) + ["--steps", str(steps), "--backend", "ucx", "--mesh", "dp=auto"] + extra

    def ck_args(self, ck):
        return ["--save", ck, "--save-every", "2", "--resume", "auto"]

    # --- one repetition of each case: (Run, event time, checkpoint, log path, steps, worlds) ----

    def in_rank(self, name, fault, extra, launch_extra):
        d = self.fresh(name)
        ck, log = os.path.join(d, "ck"), os.path.join(d, "log.jsonl")
        argv = [self.b.bin, "launch", "--nproc", "2:3", "--max-restarts", "2", "--elastic-log", log] + launch_extra
        argv += self.train(STEPS_KILL, extra + self.ck_args(ck))
        r = Run(dict(self.b.env, TESSERA_FAULT=fault))
        r.start(argv)
        r.codes = r.wait()
        stamps = [float(m.group(1)) for _, _, t in r.lines for m in [INJECTED.search(t)] if m]
        return r, stamps[0] if stamps else None, ck, log, STEPS_KILL, (3, 2)

    def add(self):
        d = self.fresh("elastic-add")
        ck, log = os.path.join(d, "ck"), os.path.join(d, "log.jsonl")
        token = "elastic-" + os.urandom(8).hex()
        env = dict(self.b.env, TESSERA_RDZV_TOKEN=token)
        state = {}

        def then(run, text):
            m = PORT.match(text)
            if m:
                state["port"] = m.group(1)
            if "t_add" not in state and re.match(r"\[rank 0\] step 3/", text):
                state["t_add"] = run.start([self.b.bin, "launch", "--join", f"127.0.0.1:{state['port']}",
                                            "--nproc", "1"], env)

        argv = [self.b.bin, "launch", "--nnodes", "1:2", "--nproc", "2", "--join-timeout", "1",
                "--max-restarts", "1", "--elastic-log", log]
        argv += self.train(STEPS_ADD, ["--timeout", str(self.b.a.timeout)] + self.ck_args(ck))
        r = Run(env, then)
        r.start(argv)
        r.codes = r.wait()
        # The member's own wait() may not have begun when the leader ended: wait for it too.
        r.codes = r.wait()
        return r, state.get("t_add"), ck, log, STEPS_ADD, (2, 3)

    def fresh(self, name):
        d = os.path.join(self.dir, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    # --- the by-hand sequence -------------------------------------------------------------------

    def by_hand(self, steps, worlds, resumed):
        """{backend: path of the final checkpoint} of the by-hand sequence changing at `resumed`."""
        key = (steps, worlds, resumed)
        if key in self.by_hand_cache:
            return self.by_hand_cache[key]
        d = os.path.join(self.dir, "by-hand-%d-%d-%d-%d" % (steps, worlds[0], worlds[1], resumed))
        os.makedirs(d, exist_ok=True)
        out = {}
        for backend in ("ucx", "local"):
            a, b = os.path.join(d, backend + ".A"), os.path.join(d, backend + ".B")
            common = model(self.src) + ["--steps", str(steps), "--backend", backend, "--timeout", "60"]
            first = common + ["--mesh", f"dp={worlds[0]}", "--save", a, "--save-every", str(resumed),
                              "--keep-checkpoints", str(steps)]
            second = common + ["--mesh", f"dp={worlds[1]}", "--resume", f"{a}.step{resumed}", "--save", b]
            ok = True
            for world, args in ((worlds[0], first), (worlds[1], second)):
                argv = [self.b.bin, "train"] + args
                if backend == "ucx":
                    argv = [self.b.bin, "launch", "--nproc", str(world), "--", "train"] + args
                r = subprocess.run(argv, env=self.b.env, capture_output=True, text=True, timeout=HUNG_S)
                ok = ok and r.returncode == 0
            out[backend] = b if ok else None
        self.by_hand_cache[key] = out
        return out

    # --- driver ---------------------------------------------------------------------------------

    def cases(self):
        t = ["--timeout", str(self.b.a.timeout)]
        return [
            ("elastic-kill", "rank 2 of 3 killed in its step-5 gradient all-reduce (round 0): round 1 on 2 ranks",
             "TESSERA_FAULT=kill:allreduce:step=5:rank=2:round=0, --nproc 2:3",
             lambda: self.in_rank("elastic-kill", "kill:allreduce:step=5:rank=2:round=0", t, [])),
            ("elastic-stall", "rank 2 of 3 stalled (SIGSTOP) in its step-5 gradient all-reduce: found by the heartbeat",
             "TESSERA_FAULT=stall:allreduce:step=5:rank=2:round=0, --nproc 2:3 --heartbeat-timeout 2, --timeout 60",
             lambda: self.in_rank("elastic-stall", "stall:allreduce:step=5:rank=2:round=0", ["--timeout", "60"],
                                  ["--heartbeat-timeout", "2"])),
            ("elastic-add", "a launcher of 1 rank joins a 2-rank job after step 3: round 1 on 3 ranks",
             "tessera launch --join HOST:PORT --nproc 1 (member), leader --nnodes 1:2 --nproc 2", self.add),
        ]

    def one(self, name, run):
        r, t0, ck, log, steps, worlds = run()
        rounds = [json.loads(l) for l in open(log)] if os.path.exists(log) else []
        rep = {"exit": [str(c) for c in r.codes], "rounds": len(rounds), "found_s": None, "started_s": None,
               "first_step_s": None,
               "launcher_restart_s": None, "steps_lost": None, "time_lost_s": None, "resumed_step": None,
               "same_ucx": False, "same_local": False, "output": r.text()}
        if len(rounds) >= 2 and t0:
            r0, r1 = rounds[0], rounds[1]
            rep["found_s"] = r0["ended_s"] - t0
            rep["started_s"] = r1["started_s"] - t0
            if r1["first_step_s"] is not None:
                rep["first_step_s"] = r1["first_step_s"] - t0
            rep.update(launcher_restart_s=r1["restart_s"], steps_lost=r1["steps_lost"], time_lost_s=r1["time_lost_s"],
                       resumed_step=r1["resumed_step"])
            if r1["resumed_step"] and os.path.exists(ck) and all(c == "0" for c in rep["exit"]):
                ref = self.by_hand(steps, worlds, r1["resumed_step"])
                for backend in ("ucx", "local"):
                    rep["same_" + backend] = bool(ref[backend]) and same_file(ck, ref[backend])
        return rep

    def run(self, only):
        results = []
        for name, what, how, run in self.cases():
            if only and name not in only:
                continue
            reps = []
            for _ in range(self.b.a.reps):
                reps.append(self.one(name, run))
                x = reps[-1]
                print(f"faults: {name}: found {x['found_s']}, first step {x['first_step_s']}, resumed "
                      f"{x['resumed_step']}, same ucx {x['same_ucx']} local {x['same_local']}, exit {x['exit']}",
                      file=sys.stderr)
                if self.b.a.logs:
                    os.makedirs(self.b.a.logs, exist_ok=True)
                    with open(os.path.join(self.b.a.logs, f"{name}.{len(reps) - 1}.log"), "w") as f:
                        f.write(x["output"] + "\n")
            results.append(summarise(name, what, how, reps))
        return results


def same_file(a, b):
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


def stat(reps, key):
    v = [r[key] for r in reps if r[key] is not None]
    if not v:
        return None
    return {"median": round(statistics.median(v), 3), "min": round(min(v), 3), "max": round(max(v), 3),
            "n": len(v), "of": len(reps)}


def summarise(name, what, how, reps):
    return {"name": name, "change": what, "how": how,
            "found_s": stat(reps, "found_s"), "started_s": stat(reps, "started_s"),
            "first_step_s": stat(reps, "first_step_s"),
            "launcher_restart_s": stat(reps, "launcher_restart_s"), "time_lost_s": stat(reps, "time_lost_s"),
            "steps_lost": sorted({r["steps_lost"] for r in reps if r["steps_lost"] is not None}),
            "resumed_step": sorted({r["resumed_step"] for r in reps if r["resumed_step"] is not None}),
            "exit_codes": sorted({", ".join(r["exit"]) for r in reps}),
            "same_ucx": sum(r["same_ucx"] for r in reps), "same_local": sum(r["same_local"] for r in reps),
            "reps": len(reps)}


def table(results, fmt):
    out = ["| change | injected by | found, s | round 1 started, s | round 1's first step, s | time lost, s "
           "| steps lost (resumed at) | exit code | = by hand, ucx | = by hand, local |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        steps = "/".join(map(str, r["steps_lost"])) or "—"
        at = "/".join(map(str, r["resumed_step"])) or "—"
        out.append(f"| {r['change']} | `{r['how']}` | {fmt(r['found_s'])} | {fmt(r['started_s'])} | "
                   f"{fmt(r['first_step_s'])} | "
                   f"{fmt(r['time_lost_s'])} | {steps} ({at}) | {' / '.join(r['exit_codes'])} | "
                   f"{r['same_ucx']} of {r['reps']} | {r['same_local']} of {r['reps']} |")
    return "\n".join(out)
