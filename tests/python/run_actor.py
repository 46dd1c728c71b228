"""An actor whose envs a Python factory builds: `rlfleet.run_actor` with a
lambda returning the test Corridor (the test `python_client` reads the
report line this prints).

usage: run_actor.py SERVER PIN ENVS_DIR
"""

import sys

import rlfleet

server, pin, envs_dir = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, envs_dir)
from rlfleet_test_envs import Corridor  # noqa: E402

built = []


def factory():
    env = Corridor()
    built.append(env)
    return env


print(rlfleet.run_actor(server, factory, n_envs=2, pin=pin, actor_id="py-actor"))
print(f"built {len(built)} envs")
