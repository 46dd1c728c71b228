"""Replays episodes in the reference Gymnasium for rlfleet's parity tests.

Reads one JSON request from stdin:
    {"env": ID, "episodes": [{"state": [...], "actions": [...]}, ...]}
For each episode it resets the environment, overwrites the internal state with
the given one (in the dtype Gymnasium's own reset leaves), then steps the given
actions until the episode ends or the actions run out. Writes to stdout:
    {"gymnasium": VERSION, "episodes": [{"steps": [{"obs", "reward",
     "terminated", "truncated", "state"}, ...]}, ...]}
Floats round-trip exactly through JSON (repr).
"""

import json
import sys

import gymnasium as gym
import numpy as np

# The dtype each environment's reset() leaves its state in.
STATE_DTYPE = {
    "CartPole-v1": np.float64,
    "Acrobot-v1": np.float32,
    "MountainCar-v0": np.float64,
    "MountainCarContinuous-v0": np.float64,
    "Pendulum-v1": np.float64,
}
CONTINUOUS = {"MountainCarContinuous-v0", "Pendulum-v1"}


def main():
    req = json.load(sys.stdin)
    env_id = req["env"]
    env = gym.make(env_id)
    out = []
    for ep in req["episodes"]:
        env.reset(seed=0)
        env.unwrapped.state = np.array(ep["state"], dtype=STATE_DTYPE[env_id])
        steps = []
        for a in ep["actions"]:
            action = np.array([a], dtype=np.float32) if env_id in CONTINUOUS else int(a)
            obs, reward, terminated, truncated, _ = env.step(action)
            steps.append(
                {
                    "obs": [float(x) for x in obs],
                    "reward": float(reward),
                    "terminated": bool(terminated),
                    "truncated": bool(truncated),
                    "state": [float(x) for x in env.unwrapped.state],
                }
            )
            if terminated or truncated:
                break
        out.append({"steps": steps})
    json.dump({"gymnasium": gym.__version__, "episodes": out}, sys.stdout)


if __name__ == "__main__":
    main()
