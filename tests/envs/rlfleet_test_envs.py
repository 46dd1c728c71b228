"""Environments written for rlfleet's tests, with the Gymnasium API.

They are what a user's own code looks like to rlfleet: imported by
`python:rlfleet_test_envs:NAME` with `python_path = ["tests/envs"]`.
"""

import os
import time

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """Walk right along a corridor of `length` cells to its end.

    Observations are the position one-hot, shaped (2, length // 2) to
    exercise flattening. Each step costs 0.1; reaching the end pays 1.0 and
    terminates. Episodes are truncated after `max_steps`. The optimal return
    is 1.0 - 0.1 * (length - 2) (the last step is not charged).
    """

    def __init__(self, length=8, max_steps=50):
        assert length % 2 == 0
        self.length = length
        self.max_steps = max_steps
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2, length // 2), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0
        self.t = 0

    def _obs(self):
        obs = np.zeros(self.length, dtype=np.float32)
        obs[self.pos] = 1.0
        return obs.reshape(2, self.length // 2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.t += 1
        self.pos = min(self.length - 1, self.pos + 1) if action == 1 else max(0, self.pos - 1)
        if self.pos == self.length - 1:
            return self._obs(), 1.0, True, False, {}
        return self._obs(), -0.1, False, self.t >= self.max_steps, {}


class PixelCorridor(Corridor):
    """A Corridor seen as a uint8 image: shape (1, 4, length), the column of
    the agent's cell lit (255) on every row, everything else 0."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Box(0, 255, (1, 4, self.length), np.uint8)

    def _obs(self):
        img = np.zeros((1, 4, self.length), dtype=np.uint8)
        img[0, :, self.pos] = 255
        return img


# Steps taken by every FaultyCorridor of this process.
_PROCESS_STEPS = 0


class FaultyCorridor(Corridor):
    """A Corridor that raises on the `fail_at`-th step its process takes
    (once per process: the env rebuilt after the fault carries on)."""

    def __init__(self, fail_at=25, **kwargs):
        super().__init__(**kwargs)
        self.fail_at = fail_at

    def step(self, action):
        global _PROCESS_STEPS
        _PROCESS_STEPS += 1
        if _PROCESS_STEPS == self.fail_at:
            raise RuntimeError(f"simulator diverged at step {self.fail_at}")
        return super().step(action)


class Stalling(Corridor):
    """A Corridor whose process stops for `RLFLEET_TEST_STALL_SECS` seconds
    at the `RLFLEET_TEST_STALL_AT`-th step it takes (once), when those are
    set in its environment: a slow simulator step (a few seconds), or a
    hung one (an hour). With `RLFLEET_TEST_STALL_MARK` set, it creates
    that file as it stops, so a test can wait for the stall itself."""

    def step(self, action):
        global _PROCESS_STEPS
        _PROCESS_STEPS += 1
        if _PROCESS_STEPS == int(os.environ.get("RLFLEET_TEST_STALL_AT", "0")):
            mark = os.environ.get("RLFLEET_TEST_STALL_MARK")
            if mark:
                open(mark, "w").close()
            time.sleep(float(os.environ["RLFLEET_TEST_STALL_SECS"]))
        return super().step(action)


class Diverging(Corridor):
    """A Corridor whose simulator diverges on the third step of an episode:
    its observation turns NaN (and the reward infinite on the fourth)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.t == 3:
            obs = np.full_like(obs, np.nan)
        if self.t == 4:
            reward = float("inf")
        return obs, reward, terminated, truncated, info


class Fluke(gym.Env):
    """One-step episodes that pay 1.0 when reset with a seed below
    `lucky_below` (rlfleet's screening seeds are below it, its confirming
    seeds above) and 0.0 otherwise, whatever the action: a policy that
    looks solved on the starts a screening evaluation uses and is not on
    the confirming evaluation's."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, lucky_below=(1 << 31) + (1 << 30)):
        self.lucky_below = lucky_below
        self.lucky = True

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.lucky = seed is None or seed < self.lucky_below
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(1, dtype=np.float32), float(self.lucky), True, False, {}


class DictObservation(gym.Env):
    """An env whose observations rlfleet does not support (a Dict)."""

    observation_space = gym.spaces.Dict({"position": gym.spaces.Box(-1.0, 1.0, (2,))})
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        return {"position": np.zeros(2, dtype=np.float32)}, {}

    def step(self, action):
        return {"position": np.zeros(2, dtype=np.float32)}, 0.0, True, False, {}


class ActionsInBox(gym.Wrapper):
    """Raises if an action is not inside the action space's box (shape,
    dtype, bounds): rlfleet's continuous actions must always be."""

    def step(self, action):
        space = self.env.action_space
        action = np.asarray(action)
        if action.shape != space.shape or action.dtype != space.dtype:
            raise AssertionError(f"action {action!r} does not have the space's shape and dtype")
        if not np.all((action >= space.low) & (action <= space.high)):
            raise AssertionError(f"action {action} is outside [{space.low}, {space.high}]")
        return self.env.step(action)


class Catch(gym.Env):
    """bsuite's Catch as a uint8 image: a ball falls from a random column
    of the top row of a `rows` x `columns` board, one row a step; the
    paddle on the bottom row moves left, stays or moves right (actions 0,
    1, 2). When the ball reaches the bottom row the episode ends with
    reward 1 if the paddle is under it, else -1. Observations are the board
    shaped (1, rows, columns), ball and paddle 255, the rest 0. The optimal
    return is 1.0; uniformly random play averages about -0.6 on 10 x 5.
    """

    def __init__(self, rows=10, columns=5):
        self.rows, self.columns = rows, columns
        self.observation_space = gym.spaces.Box(0, 255, (1, rows, columns), np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self.ball = (0, 0)
        self.paddle = columns // 2

    def _obs(self):
        img = np.zeros((1, self.rows, self.columns), dtype=np.uint8)
        img[0, self.ball[0], self.ball[1]] = 255
        img[0, self.rows - 1, self.paddle] = 255
        return img

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.ball = (0, int(self.np_random.integers(self.columns)))
        self.paddle = self.columns // 2
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.paddle = int(np.clip(self.paddle + int(action) - 1, 0, self.columns - 1))
        self.ball = (self.ball[0] + 1, self.ball[1])
        if self.ball[0] == self.rows - 1:
            reward = 1.0 if self.paddle == self.ball[1] else -1.0
            return self._obs(), reward, True, False, {}
        return self._obs(), 0.0, False, False, {}


class Frames(gym.Env):
    """Random uint8 frames of any `shape` (Atari's (84, 84, 4) stack by
    default) and `n_actions` actions, `length` steps an episode, reward 1
    for action 0: a stand-in of Atari's sizes for throughput and wiring,
    with no game to learn beyond the reward rule."""

    def __init__(self, shape=(84, 84, 4), n_actions=6, length=50):
        self.shape = tuple(shape)
        self.length = length
        self.observation_space = gym.spaces.Box(0, 255, self.shape, np.uint8)
        self.action_space = gym.spaces.Discrete(n_actions)
        self.t = 0

    def _obs(self):
        return self.np_random.integers(0, 256, self.shape, dtype=np.uint8)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.t += 1
        reward = 1.0 if int(action) == 0 else 0.0
        return self._obs(), reward, False, self.t >= self.length, {}


class BoolCatch(Catch):
    """Catch as a third-party image game suite writes it (MinAtar's way):
    observations are boolean planes shaped (rows, columns, 2), channels
    last — the ball's plane, then the paddle's — and `reset` seeds numpy's
    legacy `RandomState`, which refuses seeds of 2**32 and above. Rules as
    `Catch`: the optimal return is 1.0.
    """

    def __init__(self, rows=10, columns=5):
        super().__init__(rows, columns)
        self.observation_space = gym.spaces.Box(0, 1, (rows, columns, 2), bool)
        self.random = np.random.RandomState(0)

    def _obs(self):
        img = np.zeros((self.rows, self.columns, 2), dtype=bool)
        img[self.ball[0], self.ball[1], 0] = True
        img[self.rows - 1, self.paddle, 1] = True
        return img

    def reset(self, seed=None, options=None):
        self.random = np.random.RandomState(seed)
        self.ball = (0, int(self.random.randint(self.columns)))
        self.paddle = self.columns // 2
        return self._obs(), {}


_RAISED = []


class GroupCounting(gym.Env):
    """An env that spans the ranks of an MPI env group (`ranks_per_env`):
    every step is an allreduce over the group's communicator `comm`.

    The observation is `[tag, t, ranks]`: the reset seed modulo 1000, the
    step, and the number of ranks that took part in the step (the
    allreduce of 1 from each). An episode terminates after `5 + seed % 7`
    steps. Each rank counts the steps it took and writes
    `STEPS RANKS` to `log_dir/steps-WORLDRANK` after every step. With
    `raise_rank`, that rank of the group raises `RuntimeError` at its
    `raise_at`-th step (once per process), before the collective: the
    other ranks are then left waiting in it. The env built on world rank
    `wide_world_rank` observes 4 values instead of 3 (a group whose ranks
    disagree). With `sleep_rank`, that rank sleeps 20 s at its `sleep_at`-th
    step (once per process), before the collective.
    """

    def __init__(
        self,
        comm=None,
        log_dir=None,
        raise_rank=None,
        raise_at=0,
        wide_world_rank=None,
        sleep_rank=None,
        sleep_at=0,
    ):
        self.comm = comm
        self.rank = comm.Get_rank() if comm is not None else 0
        self.log_dir = log_dir
        self.raise_rank, self.raise_at = raise_rank, raise_at
        self.sleep_rank, self.sleep_at = sleep_rank, sleep_at
        width = 3
        if wide_world_rank is not None and comm is not None:
            from mpi4py import MPI

            if MPI.COMM_WORLD.Get_rank() == wide_world_rank:
                width = 4
        self.observation_space = gym.spaces.Box(0.0, 1e6, (width,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.tag, self.t, self.length, self.steps = 0, 0, 5, 0

    def _ranks(self):
        if self.comm is None:
            return 1
        from mpi4py import MPI

        ones = np.ones(1, dtype=np.int64)
        total = np.zeros(1, dtype=np.int64)
        self.comm.Allreduce(ones, total, op=MPI.SUM)
        return int(total[0])

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        seed = 0 if seed is None else seed
        self.tag, self.t, self.length = seed % 1000, 0, 5 + seed % 7
        return np.array([self.tag, 0, self._ranks()], dtype=np.float32), {}

    def step(self, action):
        self.steps += 1
        if (
            self.raise_rank == self.rank
            and self.steps >= self.raise_at
            and not _RAISED
        ):
            _RAISED.append(self.steps)
            raise RuntimeError(f"simulated failure of group rank {self.rank}")
        if self.sleep_rank == self.rank and self.steps >= self.sleep_at and not _RAISED:
            _RAISED.append(self.steps)
            time.sleep(20.0)
        ranks = self._ranks()
        self.t += 1
        if self.log_dir is not None:
            from mpi4py import MPI

            path = os.path.join(self.log_dir, f"steps-{MPI.COMM_WORLD.Get_rank()}")
            previous = 0
            if os.path.exists(path):
                with open(path) as f:
                    previous = int(f.read().split()[0])
            with open(path, "w") as f:
                f.write(f"{previous + 1} {ranks}")
        obs = np.array([self.tag, self.t, ranks], dtype=np.float32)
        return obs, 1.0, self.t >= self.length, False, {}


class BrokenReset(Corridor):
    """A Corridor that cannot reset in a process where
    `RLFLEET_TEST_BREAK_RESET` is set (an actor missing what the env
    needs): every episode it is given fails at once."""

    def reset(self, seed=None, options=None):
        if os.environ.get("RLFLEET_TEST_BREAK_RESET"):
            raise RuntimeError("this simulator cannot start here")
        return super().reset(seed=seed, options=options)


class NeedsLicense(Corridor):
    """A Corridor that cannot be built in a process where
    `RLFLEET_TEST_NO_LICENSE` is set (a simulator whose license server an
    actor's node cannot reach)."""

    def __init__(self, **kwargs):
        if os.environ.get("RLFLEET_TEST_NO_LICENSE"):
            raise RuntimeError("no license here")
        super().__init__(**kwargs)
