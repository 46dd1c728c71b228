"""The device half of scripts/gpu-check.sh: runs rlfleet's binaries on the
machine it is on (a GPU machine, or with --dry-run this CPU machine on tiny
budgets) and writes gpu.json and gpu.log under OUT.

usage: gpu_check.py --bin DIR --out DIR [--dry-run] [--budget SECS]
                    [--deadline SECS] [--torch-python PY] [--steps A,B]
                    [--pong-secs S] [--pong-actors N] [--atari-steps N]
                    [--envs-per-actor N,M] [--lanes N,M] [--ahead N,M]

Steps, in order of value (a run cut short still returns the most
important figures; each is skipped once --deadline seconds have passed),
each recorded even when it fails (its "error" says why), each with its
time (`<step>_secs`):
- machine: nvidia-smi's card, the Python and torch seen, the binaries'
  missing shared libraries;
- pong: `config/pong-ppo-seed-a2c.toml` (PPO, CleanRL's ppo_atari
  settings) trained for --pong-secs with one local actor process per
  free core (8 envs each): its learning curve (env steps, wall seconds,
  the mean of the last 20 training episodes), the mean of the last 100,
  frames/s in all and per CPU core, GPU utilisation;
- atari: Pong DQN `async`, DQN `seed` (the same DQN acted for by the
  learner's front on the GPU rather than by each actor's CPU) and PPO
  `seed-a2c` end to end with local actors of 8 and of 1 envs each
  (--envs-per-actor), `seed-a2c` again with its front allowed 16 batches
  ahead of training (--ahead: acting goes on during PPO's update) and
  with each actor's envs in two lanes (one lane steps while the other
  waits for its actions), each against the same actors under `random`,
  with the learner's busy share and the `seed` front's passes, waits and
  time held behind training; GPU utilisation sampled with nvidia-smi;
- r2d2: `rlfleet-bench r2d2` (R2D2 sequence updates: burn-in, n-step
  double-Q under h, priorities back) against PyTorch-Python, on the
  default device;
- concurrent: 1 and 4 concurrent Pong `seed-a2c` runs on one daemon
  (`learner-server serve`) sharing one fleet of actors
  (`rlfleet-bench fleet --shares-only`): frames/s in all against one
  run's;
- cartpole: DQN `single` CartPole to a confirmed solve; the learner's
  logged device;
- resume: a checkpoint written on the default device (the GPU) resumed on
  the CPU and one written on the CPU resumed on the default device, each
  resumed run's checkpoint holding the same weights bit for bit;
- cnn: `rlfleet-bench cnn` (DQN-Nature update and seed inference from
  uint8 frames at batch 32 and 256 against PyTorch-Python on the same
  device), once on the default device and once on the CPU (cnn_cpu).
"""

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = None


def log(*parts):
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    LOG.write(line + "\n")
    LOG.flush()


def run(cmd, timeout, env=None, cwd=None):
    """Runs cmd; (exit code, stdout + stderr). A timeout is code 124."""
    log("$", " ".join(str(c) for c in cmd))
    try:
        p = subprocess.run(
            [str(c) for c in cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            env=env,
            cwd=cwd,
            text=True,
        )
        out = p.stdout
        code = p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        code = 124
    LOG.write(out)
    LOG.flush()
    return code, out


def cpu_env(env):
    """The same environment with every GPU hidden from libtorch."""
    e = dict(env)
    e["CUDA_VISIBLE_DEVICES"] = ""
    return e


def set_keys(text, table, values):
    """`text` (TOML) with `values` set in `[table]` (keys replaced or added)."""
    lines = text.splitlines()
    try:
        start = lines.index(f"[{table}]")
    except ValueError:
        lines += ["", f"[{table}]"]
        start = len(lines) - 1
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("[")),
        len(lines),
    )
    for key, value in values.items():
        new = f"{key} = {value}"
        for i in range(start + 1, end):
            if re.match(rf"{key}\s*=", lines[i]):
                lines[i] = new
                break
        else:
            lines.insert(end, new)
            end += 1
    return "\n".join(lines) + "\n"


def config(name, out_dir, stop, extra=None):
    """The shipped cartpole-dqn-single config under `name`, its output in
    `out_dir`, with `stop` (and `extra` tables) set."""
    text = (ROOT / "config/cartpole-dqn-single.toml").read_text()
    text = re.sub(r'(?m)^name = .*$', f'name = "{name}"', text)
    text = re.sub(r'(?m)^output_dir = .*$', f'output_dir = "{out_dir}"', text)
    text = set_keys(text, "stop", stop)
    for table, values in (extra or {}).items():
        text = set_keys(text, table, values)
    path = Path(out_dir).parent / f"{name}.toml"
    path.write_text(text)
    return path


def summary(out_dir):
    """summary.toml's flat `key = value` lines."""
    s = {}
    p = Path(out_dir) / "summary.toml"
    if p.exists():
        for line in p.read_text().splitlines():
            m = re.match(r'^(\w+) = (.*)$', line)
            if m:
                v = m.group(2).strip()
                try:
                    s[m.group(1)] = json.loads(v)
                except ValueError:
                    s[m.group(1)] = v.strip('"')
    return s


def tensors(path):
    """A safetensors file's tensors as raw bytes by name (metadata aside)."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    return {
        k: body[v["data_offsets"][0] : v["data_offsets"][1]]
        for k, v in header.items()
        if k != "__metadata__"
    }


def device_logged(text):
    if "training on CUDA" in text:
        return "cuda"
    if "training on CPU" in text:
        return "cpu"
    return None


def machine(args, env):
    m = {}
    code, out = run(
        ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
        20,
    ) if shutil.which("nvidia-smi") else (1, "")
    m["gpu"] = out.strip() if code == 0 else None
    m["python"] = sys.version.split()[0]
    code, out = run(
        [args.torch_python, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"],
        60,
        env=env,
    )
    m["torch"] = out.strip().splitlines()[-1] if code == 0 and out.strip() else None
    missing = {}
    for b in ("learner-server", "actor-client", "rlfleet-bench"):
        code, out = run(["ldd", Path(args.bin) / b], 20, env=env)
        missing[b] = sorted({l.split()[0] for l in out.splitlines() if "not found" in l})
        if b == "learner-server":
            m["libpython"] = [l.strip() for l in out.splitlines() if "libpython" in l]
    m["missing_libraries"] = missing
    return m


def cartpole(args, env, work, secs):
    out = work / "cartpole"
    stop = {"max_wall_secs": f"{secs:.1f}"}
    cfg = config("gpu-cartpole", out, stop)
    t0 = time.time()
    code, text = run(
        [Path(args.bin) / "learner-server", "run", "--no-progress", "--state-dir", work / "state", cfg],
        secs + 60,
        env=env,
    )
    s = summary(out)
    reason = str(s.get("reason", ""))
    return {
        "exit": code,
        "device": device_logged(text),
        "reason": reason or None,
        "solved": reason.startswith("target reached"),
        "env_steps": s.get("env_steps"),
        "wall_secs": round(time.time() - t0, 1),
    }


def resume(args, env, work, steps):
    """A run of `steps` on one device, resumed (with no more to do) on the
    other: the resumed run's checkpoint has the same tensors."""
    result = {}
    devices = {"default": env, "cpu": cpu_env(env)}
    for first, second in (("default", "cpu"), ("cpu", "default")):
        key = f"{first}_to_{second}"
        out = work / f"resume-{key}"
        extra = {"checkpoint": {"period_steps": str(steps)}, "dqn": {"learning_starts": "200"}}
        cfg = config(f"gpu-resume-{key}", out, {"max_env_steps": str(steps), "target_eval_return": "1000000.0"}, extra)
        code, text = run(
            [Path(args.bin) / "learner-server", "run", "--no-progress", "--state-dir", work / f"state-{key}", cfg],
            300,
            env=devices[first],
        )
        ck = out / "checkpoint.safetensors"
        if code != 0 or not ck.exists():
            result[key] = {"error": f"first run exit {code}, checkpoint {ck.exists()}"}
            continue
        saved = tensors(ck)
        # The resumed run writes to a folder of its own: its checkpoint is
        # the one it wrote on the other device.
        out2 = work / f"resumed-{key}"
        cfg2 = config(f"gpu-resumed-{key}", out2, {"max_env_steps": str(steps), "target_eval_return": "1000000.0"}, extra)
        code2, text2 = run(
            [Path(args.bin) / "learner-server", "run", "--no-progress", "--state-dir", work / f"state2-{key}", "--resume", ck, cfg2],
            300,
            env=devices[second],
        )
        ck2 = out2 / "checkpoint.safetensors"
        back = tensors(ck2) if ck2.exists() else {}
        same = sorted(k for k in saved if back.get(k) == saved[k])
        result[key] = {
            "first_device": device_logged(text),
            "second_device": device_logged(text2),
            "second_exit": code2,
            "second_checkpoint": ck2.exists(),
            "tensors": len(saved),
            "identical": len(same) == len(saved) and len(saved) > 0,
            "differing": sorted(set(saved) - set(same))[:8],
        }
    return result


def bench(args, env, out, what, result):
    """`rlfleet-bench --out OUT WHAT...` with the device's torch Python as
    the PyTorch baseline; (exit code, the JSON it wrote to OUT/RESULT or
    None, the output's tail)."""
    e = dict(env)
    e["RLFLEET_TORCH_PYTHON"] = args.torch_python
    code, text = run([Path(args.bin) / "rlfleet-bench", "--out", out, *what], args.budget, env=e, cwd=ROOT)
    res = out / result
    return code, (json.loads(res.read_text()) if res.exists() else None), text[-600:]


PONG = ["config/pong-dqn-async.toml", "config/pong-dqn-seed.toml", "config/pong-ppo-seed-a2c.toml"]


def bench_cnn(args, env, work, secs, atari_steps, actors, tag, envs=1, lanes=1, configs=PONG, ahead=None):
    what = [
        "cnn", "--secs", str(secs), "--threads", str(args.threads),
        "--batches", "32,256", "--atari-steps", str(atari_steps),
        "--actors", str(actors), "--envs-per-actor", str(envs),
        "--lanes-per-actor", str(lanes), "--configs", ",".join(configs),
    ]
    if ahead is not None:
        what += ["--max-batches-ahead", str(ahead)]
    code, r, tail = bench(args, env, work / f"bench-{tag}", what, "cnn.json")
    r = r if r is not None else {"error": f"exit {code}: {tail}"}
    r["exit"] = code
    return r


def bench_r2d2(args, env, work, secs):
    what = ["r2d2", "--secs", str(secs)]
    code, rows, tail = bench(args, env, work / "bench-r2d2", what, "r2d2_update.json")
    r = {"rows": rows} if rows is not None else {"error": f"exit {code}: {tail}"}
    r["exit"] = code
    return r


def episodes(path):
    """episodes.csv's rows as (env_steps, wall_secs, return)."""
    rows = []
    p = Path(path)
    if p.exists():
        lines = p.read_text().splitlines()
        if lines:
            head = lines[0].split(",")
            at = {k: head.index(k) for k in ("env_steps", "wall_secs", "return")}
            for line in lines[1:]:
                f = line.split(",")
                rows.append((int(f[at["env_steps"]]), float(f[at["wall_secs"]]), float(f[at["return"]])))
    return rows


def curve(rows, points=200):
    """At most `points` points of (env steps, wall seconds, mean return of
    the last 20 episodes), the last episode's always among them."""
    out = []
    every = max(1, len(rows) // points)
    for i in range(len(rows)):
        if (i + 1) % every == 0 or i + 1 == len(rows):
            last = [r[2] for r in rows[max(0, i - 19) : i + 1]]
            out.append([rows[i][0], round(rows[i][1], 1), round(sum(last) / len(last), 2)])
    return out


def pong(args, env, work, out, secs, actors, envs, extra=()):
    """PPO on Pong (`config/pong-ppo-seed-a2c.toml`) for `secs` of wall
    time with `actors` local actor processes of `envs` envs: its curve and
    rates. Training episodes judge it (no evaluations during the run)."""
    d = work / "pong-learn"
    cmd = [
        Path(args.bin) / "learner-server", "run", "--no-progress", "--state-dir", work / "state-pong",
        ROOT / "config/pong-ppo-seed-a2c.toml", "--overwrite",
        "--local-actors", str(actors), "--envs-per-actor", str(envs),
        "--set", f"stop.max_wall_secs={secs:.1f}", "--set", "eval.period_steps=1000000000",
        "--set", f"output_dir={d}", *extra,
    ]
    with GpuSampler() as sampler:
        code, text = run(cmd, secs + 180, env=env, cwd=ROOT)
    s = summary(d)
    rows = episodes(d / "episodes.csv")
    keep = out / "pong-learn"
    keep.mkdir(parents=True, exist_ok=True)
    for f in ("episodes.csv", "learning_curve.png", "summary.toml"):
        if (d / f).exists():
            shutil.copy(d / f, keep / f)
    steps, wall = s.get("env_steps"), s.get("wall_secs")
    fps = steps / wall if steps and wall else None
    last100 = [r[2] for r in rows[-100:]]
    return {
        "exit": code,
        "device": device_logged(text),
        "reason": s.get("reason"),
        "actors": actors,
        "envs_per_actor": envs,
        "cores": os.cpu_count(),
        "env_steps": steps,
        "wall_secs": wall,
        "frames_per_sec": fps,
        "frames_per_sec_per_core": fps / os.cpu_count() if fps else None,
        "episodes": len(rows),
        "last100_mean_return": sum(last100) / len(last100) if last100 else None,
        "best_rolling20": max((c[2] for c in curve(rows, len(rows) or 1)), default=None),
        "curve": curve(rows),
        "gpu": sampler.summary(),
    }


def concurrent(args, env, work, levels, secs, warmup, actors, envs):
    """`levels` concurrent Pong `seed-a2c` runs on one daemon sharing
    `actors` actors of `envs` envs (`rlfleet-bench fleet --shares-only`)."""
    what = [
        "fleet", "--shares-only", "--config", str(ROOT / "config/pong-ppo-seed-a2c.toml"),
        "--levels", levels, "--secs", str(secs), "--warmup-secs", str(warmup),
        "--actors", str(actors), "--envs", str(envs),
    ]
    with GpuSampler() as sampler:
        code, r, tail = bench(args, env, work / "bench-concurrent", what, "fleet_shares.json")
    r = r if r is not None else {"error": f"exit {code}: {tail}"}
    r["exit"] = code
    r["gpu"] = sampler.summary()
    return r


def atari(args, env, work, dry):
    """Pong end to end against `random` (see the module's docstring)."""
    atari_steps = args.atari_steps or (300 if dry else 6000)
    with GpuSampler() as sampler:
        rows = []
        ints = lambda text: [int(x) for x in text.split(",") if x]
        ppo = [c for c in PONG if "seed-a2c" in c]
        for envs in ints(args.envs_per_actor):
            runs = []
            for lanes in [n for n in ints(args.lanes) if n <= envs]:
                runs.append((lanes, PONG if lanes == 1 else ppo, None))
                if lanes == 1:
                    runs += [(1, ppo, a) for a in ints(args.ahead)]
            for lanes, configs, ahead in runs:
                try:
                    r = bench_cnn(args, env, work, 0.1, atari_steps, 2 if dry else 10,
                                  f"atari-{envs}-{lanes}-{ahead}", envs, lanes, configs, ahead)
                    rows += r.get("atari", [r])
                except Exception as e:
                    rows.append({"error": f"{type(e).__name__}: {e}"})
    return {"rows": rows, "gpu": sampler.summary()}


class GpuSampler:
    """nvidia-smi's utilisation every second while a step runs."""

    def __init__(self):
        self.samples, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.is_set() and shutil.which("nvidia-smi"):
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, timeout=5,
                ).stdout.strip().split(",")
                self.samples.append([float(x) for x in out])
            except Exception:
                pass
            self.stop.wait(1.0)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=5)

    def summary(self):
        if not self.samples:
            return None
        util = [s[0] for s in self.samples]
        return {"samples": len(util), "mean_util": sum(util) / len(util), "max_util": max(util),
                "max_memory_mib": max(s[1] for s in self.samples)}


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--budget", type=float, default=420.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--torch-python", default=sys.executable)
    ap.add_argument("--steps", default="", help="comma-separated steps to run (default: all)")
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="seconds after which no further step starts (default: none)")
    ap.add_argument("--pong-secs", type=float, default=0.0,
                    help="wall seconds of the Pong learning run (default: 420, 20 dry)")
    ap.add_argument("--pong-actors", type=int, default=0,
                    help="local actor processes of the Pong learning run (default: one per core "
                         "but two, at least 1)")
    ap.add_argument("--atari-steps", type=int, default=0, help="env steps per Pong run (default: 6000, 300 dry)")
    ap.add_argument("--envs-per-actor", default="8,1",
                    help="comma-separated envs per Pong actor, one set of runs each (default: 8,1)")
    ap.add_argument("--lanes", default="1,2",
                    help="comma-separated lanes per Pong actor (actor-client --lanes); "
                         "above 1, `seed-a2c` only (default: 1,2)")
    ap.add_argument("--ahead", default="16",
                    help="comma-separated `max_batches_ahead` for an extra `seed-a2c` row each "
                         "(the config's own is 2; default: 16)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    LOG = open(out / "gpu.log", "w")
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "info")
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    dry = args.dry_run
    report = {"dry_run": dry, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    cores = os.cpu_count() or 1
    pong_actors = args.pong_actors or max(1, cores - 2)
    # The dry run's Pong episodes end after 400 frames (100 steps), so that
    # a few finish within its seconds.
    short = ["--set", "env_kwargs.max_num_frames_per_episode=400"] if dry else []
    steps = [
        ("machine", lambda: machine(args, env)),
        ("pong", lambda: pong(args, env, work, out, args.pong_secs or (20 if dry else 420),
                              1 if dry else pong_actors, 2 if dry else 8, short)),
        ("atari", lambda: atari(args, env, work, dry)),
        ("r2d2", lambda: bench_r2d2(args, env, work, 0.3 if dry else 3)),
        ("concurrent", lambda: concurrent(args, env, work, "1,2" if dry else "1,4", 3 if dry else 20,
                                          5 if dry else 15, 2 if dry else pong_actors, 2 if dry else 8)),
        ("cartpole", lambda: cartpole(args, env, work, 10 if dry else 120)),
        ("resume", lambda: resume(args, env, work, 400 if dry else 2000)),
        ("cnn", lambda: bench_cnn(args, env, work, 0.3 if dry else 3, 0, 0, "default")),
        ("cnn_cpu", lambda: bench_cnn(args, cpu_env(env), work, 0.3 if dry else 2, 0, 0, "cpu")),
    ]
    only = {s for s in args.steps.split(",") if s}
    report["steps"] = sorted(only) if only else "all"
    report["order"] = [name for name, _ in steps if not only or name in only]
    t_start = time.time()
    for name, step in steps:
        if only and name not in only:
            continue
        if args.deadline and time.time() - t_start > args.deadline:
            report[name] = {"skipped": f"the deadline of {args.deadline:.0f} s had passed"}
            log(name, "skipped: deadline")
            continue
        t0 = time.time()
        try:
            report[name] = step()
        except Exception as e:  # recorded, and the next step runs
            report[name] = {"error": f"{type(e).__name__}: {e}"}
        report[name + "_secs"] = round(time.time() - t0, 3)
        log(name, json.dumps(report[name])[:2000])
        (out / "gpu.json").write_text(json.dumps(report, indent=1))
    log("wrote", out / "gpu.json")


if __name__ == "__main__":
    main()
