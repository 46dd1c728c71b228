"""A simulator that owns its loop, driving a ``seed`` run of a learner
through ``rlfleet.Client``, then reading the run through the control API.

    python simulator.py HOST:PORT FINGERPRINT [EPISODES]

(or ``RLFLEET_SERVER`` and ``RLFLEET_PIN`` set, with no arguments). The
simulator here is a corridor: walk right to the end. The test suite
type-checks this file with ``mypy --strict`` against the package's stubs.
"""

import sys

import rlfleet

# An action: a discrete one (int) or a continuous one (floats).
Action = int | list[float]


class Corridor:
    """Eight cells; action 1 steps right, 0 left; the last cell ends it."""

    def __init__(self) -> None:
        self.pos = 0
        self.t = 0

    def reset(self) -> list[float]:
        self.pos, self.t = 0, 0
        return self.observe()

    def observe(self) -> list[float]:
        return [1.0 if i == self.pos else 0.0 for i in range(8)]

    def advance(self, action: Action) -> tuple[list[float], float, bool, bool]:
        step = 1 if action == 1 else -1
        self.pos = max(0, self.pos + step)
        self.t += 1
        done = self.pos == 7
        return self.observe(), 1.0 if done else -0.1, done, self.t >= 50


def play(client: rlfleet.Client, sim: Corridor, episodes: int) -> float:
    """Plays `episodes` episodes; returns the mean return."""
    total = 0.0
    for _ in range(episodes):
        action: Action | None = client.act(sim.reset())
        while action is not None:
            obs, reward, terminated, truncated = sim.advance(action)
            total += reward
            action = client.step(reward, terminated, truncated, obs)
    return total / episodes


def main(argv: list[str]) -> None:
    server = argv[1] if len(argv) > 1 else None
    pin = argv[2] if len(argv) > 2 else None
    episodes = int(argv[3]) if len(argv) > 3 else 10
    client = rlfleet.Client(server, pin=pin, actor_id="simulator")
    try:
        mean = play(client, Corridor(), episodes)
    except rlfleet.RunEndedError:
        mean = float("nan")
    print(f"run {client.run_id}: {client.episodes} episodes, mean return {mean:.2f}")
    client.close()
    control = rlfleet.Control()
    for run in control.runs(state="running"):
        print(run["id"], run["env_steps"])


if __name__ == "__main__":
    main(sys.argv)
