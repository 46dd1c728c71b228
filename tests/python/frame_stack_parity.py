"""Replays the episodes a probe run recorded through Gymnasium itself and
checks that every stack the learner built equals, bit for bit, what
Gymnasium's FrameStackObservation gives the same frames.

usage: frame_stack_parity.py PROBE_CSV SEEDS_JSON ENV_JSON

SEEDS_JSON maps episode ids to the seed the learner handed out; ENV_JSON
is {"id": ..., "kwargs": {...}, "screen_size": N, "stack": K}. Prints one
JSON line {"episodes": n, "transitions": n, "mismatches": [...]} and exits
1 on any mismatch.
"""

import csv
import json
import sys

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation


def main():
    probe_csv, seeds_json, env_json = sys.argv[1:4]
    seeds = {int(k): int(v) for k, v in json.load(open(seeds_json)).items()}
    spec = json.load(open(env_json))
    csv.field_size_limit(1 << 30)
    rows = {}
    for r in csv.DictReader(open(probe_csv)):
        rows.setdefault(int(r["episode"]), []).append(r)
    import ale_py

    gym.register_envs(ale_py)
    env = gym.make(spec["id"], **spec["kwargs"])
    env = AtariPreprocessing(env, screen_size=spec["screen_size"])
    env = FrameStackObservation(env, stack_size=spec["stack"])
    mismatches, transitions = [], 0
    for episode, steps in sorted(rows.items()):
        obs, _ = env.reset(seed=seeds[episode])
        for t, r in enumerate(steps):
            got = np.array([float(x) for x in r["obs"].split(";")], dtype=np.float64)
            want = np.asarray(obs, dtype=np.float64).ravel()
            if got.shape != want.shape or not np.array_equal(got, want):
                mismatches.append({"episode": episode, "step": t, "what": "obs"})
                break
            action = int(float(r["action"]))
            obs, reward, terminated, truncated, _ = env.step(action)
            transitions += 1
            got_next = np.array([float(x) for x in r["next_obs"].split(";")], dtype=np.float64)
            if not np.array_equal(got_next, np.asarray(obs, dtype=np.float64).ravel()):
                mismatches.append({"episode": episode, "step": t, "what": "next_obs"})
                break
            if float(r["reward"]) != float(reward) or (r["terminated"] == "1") != bool(terminated):
                mismatches.append({"episode": episode, "step": t, "what": "reward or end"})
                break
            if (terminated or truncated) and t + 1 != len(steps):
                mismatches.append({"episode": episode, "step": t, "what": "ended early"})
                break
    print(json.dumps({"episodes": len(rows), "transitions": transitions, "mismatches": mismatches}))
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
