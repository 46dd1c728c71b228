"""DQN on CartPole-v1 with the default settings of CleanRL's `dqn.py`, as
the baseline `rlfleet-bench solve` runs beside the main job. Written from
CleanRL's documented hyper-parameters and the DQN paper, not from its code.

Settings (CleanRL's defaults): one env; a 120-84 ReLU network; Adam, lr
2.5e-4 constant; replay of 10,000 transitions, learning from 10,000 env
steps; one update of a batch of 128 every 10 env steps; squared-error
loss; gamma 0.99; plain max targets from a target network copied every 500
env steps; epsilon linear from 1.0 to 0.05 over half of 500,000 env steps
(its default run length). A time-limit cut is stored as not terminal, so
its value is bootstrapped from the real last observation.

Runs for SECS wall seconds. Prints one JSON object per finished episode:
{"frames", "return", "secs"} (frames: env steps so far).
Usage: python cleanrl_dqn.py SEED SECS
"""

import json
import random
import sys
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

TOTAL = 500_000
EPS_START, EPS_END, EPS_STEPS = 1.0, 0.05, TOTAL // 2
REPLAY = 10_000
START = 10_000
TRAIN_EVERY = 10
BATCH = 128
TARGET_EVERY = 500
LR = 2.5e-4
GAMMA = 0.99


def qnet(obs, actions):
    return torch.nn.Sequential(
        torch.nn.Linear(obs, 120),
        torch.nn.ReLU(),
        torch.nn.Linear(120, 84),
        torch.nn.ReLU(),
        torch.nn.Linear(84, actions),
    )


def main():
    seed, secs = int(sys.argv[1]), float(sys.argv[2])
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    env = gym.make("CartPole-v1")
    n_obs, n_act = env.observation_space.shape[0], env.action_space.n
    online, target = qnet(n_obs, n_act), qnet(n_obs, n_act)
    target.load_state_dict(online.state_dict())
    opt = torch.optim.Adam(online.parameters(), lr=LR)

    obs_buf = np.zeros((REPLAY, n_obs), np.float32)
    next_buf = np.zeros((REPLAY, n_obs), np.float32)
    act_buf = np.zeros(REPLAY, np.int64)
    rew_buf = np.zeros(REPLAY, np.float32)
    term_buf = np.zeros(REPLAY, np.float32)
    size, pos = 0, 0

    obs, _ = env.reset(seed=seed)
    ret, t0 = 0.0, time.perf_counter()
    for step in range(1, 10**12):
        eps = max(EPS_END, EPS_START - (EPS_START - EPS_END) * step / EPS_STEPS)
        if random.random() < eps:
            action = env.action_space.sample()
        else:
            with torch.no_grad():
                action = int(online(torch.as_tensor(obs)).argmax())
        nxt, reward, term, trunc, _ = env.step(action)
        obs_buf[pos], next_buf[pos], act_buf[pos] = obs, nxt, action
        rew_buf[pos], term_buf[pos] = reward, float(term)
        pos, size = (pos + 1) % REPLAY, min(size + 1, REPLAY)
        ret += reward
        obs = nxt
        if term or trunc:
            print(
                json.dumps(
                    {"frames": step, "return": ret, "secs": time.perf_counter() - t0}
                ),
                flush=True,
            )
            obs, _ = env.reset()
            ret = 0.0
            if time.perf_counter() - t0 >= secs:
                return
        if step > START and step % TRAIN_EVERY == 0:
            idx = np.random.randint(0, size, BATCH)
            o, n = torch.as_tensor(obs_buf[idx]), torch.as_tensor(next_buf[idx])
            a, r = torch.as_tensor(act_buf[idx]), torch.as_tensor(rew_buf[idx])
            d = torch.as_tensor(term_buf[idx])
            with torch.no_grad():
                y = r + GAMMA * target(n).max(1).values * (1.0 - d)
            q = online(o).gather(1, a.unsqueeze(1)).squeeze(1)
            loss = F.mse_loss(q, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if step > START and step % TARGET_EVERY == 0:
            target.load_state_dict(online.state_dict())


if __name__ == "__main__":
    main()
