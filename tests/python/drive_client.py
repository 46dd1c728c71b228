"""A simulator that owns its main loop, driving an rlfleet `seed` run through
`rlfleet.Client` (the test `python_client` starts the learner and reads what
this prints: one JSON line).

usage: drive_client.py SERVER PIN EPISODES ENVS_DIR [PAUSE_SECS]

With PAUSE_SECS, the simulator stops that long once, after the third step
of the first episode (a slow simulator step, away from the client).
"""

import json
import sys
import time

import rlfleet

server, pin, episodes, envs_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
sys.path.insert(0, envs_dir)
from rlfleet_test_envs import Corridor  # noqa: E402

sim = Corridor()
client = rlfleet.Client(server, pin=pin, actor_id="simulator")
returns, versions = [], []
for episode in range(episodes):
    obs, _ = sim.reset(seed=episode)
    action = client.act(obs)
    total, t = 0.0, 0
    while action is not None:
        assert action in (0, 1), action
        obs, reward, terminated, truncated, _ = sim.step(action)
        t += 1
        if pause and episode == 0 and t == 3:
            time.sleep(pause)
        total += reward
        action = client.step(reward, terminated, truncated, obs)
    returns.append(total)
    versions.append(client.policy_version)
result = {
    "run_id": client.run_id,
    "returns": returns,
    "versions": versions,
    "episodes": client.episodes,
    "env_steps": client.env_steps,
    "observation_shape": client.observation_shape,
}
try:
    client.act(obs)
    result["after_end"] = "an action"
except rlfleet.RunEndedError as e:
    result["after_end"] = f"RunEndedError: {e}"
client.close()
print(json.dumps(result))
