"""PPO for one env on MinAtar or Atari, written from the PPO paper
(Schulman et al. 2017, clipped surrogate, GAE) with CleanRL's ppo_atari
settings scaled to one env, as the reference `rlfleet-bench reference
--agent ppo` runs beside config/SUITE-GAME-ppo.toml.

Settings: rollouts of 1,024 steps; 4 epochs of shuffled minibatches of
256; clip 0.1; entropy 0.01; value loss weight 0.5 (squared error, no value
clipping); advantages normalised per minibatch; gamma 0.99; GAE lambda
0.95; one Adam per network (lr 2.5e-4 annealed linearly to 0 over ANNEAL
frames, eps 1e-8), each network's gradient clipped to norm 0.5. The policy
and the value each have a network of their own; actions are sampled from
the policy's softmax.

- minatar: MinAtar's own `Environment` (sticky actions 0.1, difficulty
  ramping, the full action set) and MinAtar's network (one 16-channel 3x3
  convolution, stride 1, then 128 hidden units, ReLU).
- atari: Gymnasium's ALE/GAME-v5 (sticky actions 0.25, the minimal action
  set) with frameskip 1 under Gymnasium's AtariPreprocessing (up to 30
  no-ops at reset, 4 frames per step max-pooled over the last two, 84x84
  grey, no life-loss terminals, rewards unclipped), the last 4 frames
  stacked (FrameStackObservation: a reset fills the stack with its
  frame), and DQN-Nature's network (32 8x8/4, 64 4x4/2, 64 3x3/1, 512
  hidden units) over the bytes scaled by 1/255. An episode cut short by
  the time limit ends as a terminal one would.

Prints one JSON object per finished episode: {"frames", "return", "secs"}.
Usage: python ppo.py minatar|atari GAME SEED FRAMES ANNEAL
(GAME: MinAtar's name, `breakout`, or ALE's, `Breakout`).
"""

import json
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

ROLLOUT = 1024
MINIBATCH = 256
EPOCHS = 4
CLIP = 0.1
ENT = 0.01
VF = 0.5
MAX_NORM = 0.5
LR = 2.5e-4
GAMMA = 0.99
LAMBDA = 0.95


class MinAtar:
    """MinAtar's `Environment`: observations (channels, 10, 10) floats."""

    def __init__(self, game, seed):
        from minatar import Environment

        self.env = Environment(game)
        self.env.seed(seed)
        self.shape = (self.env.state_shape()[2], 10, 10)
        self.dtype = torch.float32
        self.actions = self.env.num_actions()

    def net(self, out):
        return torch.nn.Sequential(
            torch.nn.Conv2d(self.shape[0], 16, kernel_size=3, stride=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(16 * 8 * 8, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, out),
        )

    def _state(self):
        return torch.from_numpy(np.transpose(self.env.state(), (2, 0, 1))).float()

    def reset(self):
        self.env.reset()
        return self._state()

    def step(self, a):
        r, terminal = self.env.act(a)
        return self._state(), float(r), terminal


class Atari:
    """ALE under AtariPreprocessing, 4 frames stacked: (4, 84, 84) bytes."""

    def __init__(self, game, seed):
        import ale_py
        import gymnasium as gym

        gym.register_envs(ale_py)
        env = gym.make(f"ALE/{game}-v5", frameskip=1)
        env = gym.wrappers.AtariPreprocessing(env)
        self.env = gym.wrappers.FrameStackObservation(env, 4)
        self.seed = seed
        self.shape = (4, 84, 84)
        self.dtype = torch.uint8
        self.actions = int(self.env.action_space.n)

    def net(self, out):
        class Scaled(torch.nn.Module):
            def forward(self, x):
                return x.float() / 255.0

        return torch.nn.Sequential(
            Scaled(),
            torch.nn.Conv2d(4, 32, kernel_size=8, stride=4),
            torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, kernel_size=4, stride=2),
            torch.nn.ReLU(),
            torch.nn.Conv2d(64, 64, kernel_size=3, stride=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(64 * 7 * 7, 512),
            torch.nn.ReLU(),
            torch.nn.Linear(512, out),
        )

    def reset(self):
        obs, _ = self.env.reset(seed=self.seed)
        self.seed = None
        return torch.from_numpy(np.asarray(obs))

    def step(self, a):
        obs, r, terminated, truncated, _ = self.env.step(a)
        return torch.from_numpy(np.asarray(obs)), float(r), terminated or truncated


def main():
    suite, game, seed, frames = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    anneal = int(sys.argv[5])
    torch.set_num_threads(1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    env = {"minatar": MinAtar, "atari": Atari}[suite](game, seed)
    policy, value = env.net(env.actions), env.net(1)
    p_opt = torch.optim.Adam(policy.parameters(), lr=LR, eps=1e-8)
    v_opt = torch.optim.Adam(value.parameters(), lr=LR, eps=1e-8)
    obs = torch.zeros((ROLLOUT, *env.shape), dtype=env.dtype)
    act = torch.zeros(ROLLOUT, dtype=torch.int64)
    rew = torch.zeros(ROLLOUT)
    term = torch.zeros(ROLLOUT)
    t0 = time.time()

    s, ret, t = env.reset(), 0.0, 0
    while t < frames:
        for i in range(ROLLOUT):
            with torch.no_grad():
                logits = policy(s.unsqueeze(0))[0]
            a = int(torch.multinomial(F.softmax(logits, 0), 1).item())
            obs[i], act[i] = s, a
            s, r, terminal = env.step(a)
            rew[i], term[i] = r, float(terminal)
            ret += r
            t += 1
            if terminal:
                print(json.dumps({"frames": t, "return": ret, "secs": time.time() - t0}), flush=True)
                s, ret = env.reset(), 0.0
            if t == frames:
                return
        with torch.no_grad():
            v = value(obs).squeeze(1)
            boot = value(s.unsqueeze(0))[0, 0]
            old_logp = F.log_softmax(policy(obs), 1).gather(1, act.unsqueeze(1)).squeeze(1)
        adv = torch.zeros(ROLLOUT)
        gae = 0.0
        for i in reversed(range(ROLLOUT)):
            next_v = boot if i == ROLLOUT - 1 else v[i + 1]
            next_v = next_v * (1.0 - term[i])
            gae_carry = gae * (1.0 - term[i])
            delta = rew[i] + GAMMA * next_v - v[i]
            gae = delta + GAMMA * LAMBDA * gae_carry
            adv[i] = gae
        returns = adv + v
        lr = LR * max(0.0, 1.0 - t / anneal)
        for opt in (p_opt, v_opt):
            for g in opt.param_groups:
                g["lr"] = lr
        for _ in range(EPOCHS):
            order = torch.randperm(ROLLOUT)
            for k in range(0, ROLLOUT, MINIBATCH):
                i = order[k : k + MINIBATCH]
                logp_all = F.log_softmax(policy(obs[i]), 1)
                logp = logp_all.gather(1, act[i].unsqueeze(1)).squeeze(1)
                entropy = -(logp_all.exp() * logp_all).sum(1).mean()
                a_i = adv[i]
                a_i = (a_i - a_i.mean()) / (a_i.std() + 1e-8)
                ratio = (logp - old_logp[i]).exp()
                surrogate = torch.min(ratio * a_i, ratio.clamp(1 - CLIP, 1 + CLIP) * a_i)
                value_loss = (returns[i] - value(obs[i]).squeeze(1)).square().mean()
                loss = -surrogate.mean() - ENT * entropy + VF * value_loss
                p_opt.zero_grad()
                v_opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), MAX_NORM)
                torch.nn.utils.clip_grad_norm_(value.parameters(), MAX_NORM)
                p_opt.step()
                v_opt.step()


if __name__ == "__main__":
    main()
