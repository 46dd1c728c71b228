"""PPO on MinAtar for one env, written from the PPO paper (Schulman et al.
2017, clipped surrogate, GAE) with CleanRL's ppo_atari settings scaled to
one env, as the reference `rlfleet-bench reference --agent ppo` runs beside
config/minatar-GAME-ppo.toml.

Settings: MinAtar's network (one 16-channel 3x3 convolution, stride 1, then
a 128-unit hidden layer, ReLU) for the policy and, with a torso of its own,
for the value; rollouts of 1,024 steps; 4 epochs of shuffled minibatches of
256; clip 0.1; entropy 0.01; value loss weight 0.5 (squared error, no value
clipping); advantages normalised per minibatch; gamma 0.99; GAE lambda
0.95; one Adam per network (lr 2.5e-4 annealed linearly to 0 over ANNEAL
frames, eps 1e-8), each network's gradient clipped to norm 0.5.
Actions are sampled from the policy's softmax. The env is MinAtar's own
`Environment` (sticky actions 0.1, difficulty ramping), the full action
set.

Prints one JSON object per finished episode: {"frames", "return", "secs"}.
Usage: python minatar_ppo.py GAME SEED FRAMES ANNEAL
"""

import json
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from minatar import Environment

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


def net(channels, out):
    return torch.nn.Sequential(
        torch.nn.Conv2d(channels, 16, kernel_size=3, stride=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(16 * 8 * 8, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, out),
    )


def main():
    game, seed, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    anneal = int(sys.argv[4])
    torch.set_num_threads(1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    env = Environment(game)
    env.seed(seed)
    channels, actions = env.state_shape()[2], env.num_actions()
    policy, value = net(channels, actions), net(channels, 1)
    p_opt = torch.optim.Adam(policy.parameters(), lr=LR, eps=1e-8)
    v_opt = torch.optim.Adam(value.parameters(), lr=LR, eps=1e-8)
    obs = torch.zeros((ROLLOUT, channels, 10, 10))
    act = torch.zeros(ROLLOUT, dtype=torch.int64)
    rew = torch.zeros(ROLLOUT)
    term = torch.zeros(ROLLOUT)
    t0 = time.time()

    def state():
        return torch.from_numpy(np.transpose(env.state(), (2, 0, 1))).float()

    env.reset()
    s, ret, t = state(), 0.0, 0
    while t < frames:
        for i in range(ROLLOUT):
            with torch.no_grad():
                logits = policy(s.unsqueeze(0))[0]
            a = int(torch.multinomial(F.softmax(logits, 0), 1).item())
            r, terminal = env.act(a)
            obs[i], act[i], rew[i], term[i] = s, a, r, float(terminal)
            ret += r
            t += 1
            if terminal:
                print(json.dumps({"frames": t, "return": ret, "secs": time.time() - t0}), flush=True)
                env.reset()
                ret = 0.0
            s = state()
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
