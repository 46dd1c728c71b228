"""MinAtar's DQN, written from its paper's description (Young & Tian 2019,
"MinAtar: An Atari-inspired testbed", section 4 and appendix), as the
reference `rlfleet-bench reference` runs beside rlfleet's config.

Settings, all from the paper: one 16-channel 3x3 convolution (stride 1)
and a 128-unit hidden layer, ReLU; replay of 100,000 transitions, learning
from 5,000; batch 32; one update per frame; target network copied every
1,000 updates; RMSprop (centred, lr 2.5e-4, squared-gradient momentum 0.95,
minimum squared gradient 0.01); Huber (smooth-L1) loss; gamma 0.99; no
double Q; epsilon 1.0 until learning starts, then linear to 0.1 over
100,000 frames. The env is MinAtar's own `Environment` (sticky actions 0.1,
difficulty ramping), the full action set.

Prints one JSON object per finished episode: {"frames", "return", "secs"}.
Usage: python minatar_dqn.py GAME SEED FRAMES
"""

import json
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from minatar import Environment

REPLAY = 100_000
START = 5_000
BATCH = 32
TARGET_EVERY = 1_000
LR = 2.5e-4
GAMMA = 0.99
EPS_END = 0.1
EPS_FRAMES = 100_000


class QNet(torch.nn.Module):
    def __init__(self, channels, actions):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, 16, kernel_size=3, stride=1)
        self.hidden = torch.nn.Linear(16 * 8 * 8, 128)
        self.out = torch.nn.Linear(128, actions)

    def forward(self, x):
        x = F.relu(self.conv(x))
        x = F.relu(self.hidden(x.flatten(1)))
        return self.out(x)


def main():
    game, seed, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    env = Environment(game)
    env.seed(seed)
    channels, actions = env.state_shape()[2], env.num_actions()
    online, target = QNet(channels, actions), QNet(channels, actions)
    target.load_state_dict(online.state_dict())
    opt = torch.optim.RMSprop(
        online.parameters(), lr=LR, alpha=0.95, centered=True, eps=0.01
    )
    obs = np.zeros((REPLAY, channels, 10, 10), dtype=np.bool_)
    nxt = np.zeros((REPLAY, channels, 10, 10), dtype=np.bool_)
    act = np.zeros(REPLAY, dtype=np.int64)
    rew = np.zeros(REPLAY, dtype=np.float32)
    done = np.zeros(REPLAY, dtype=np.float32)
    size, at, updates = 0, 0, 0
    t0 = time.time()

    def state():
        return np.transpose(env.state(), (2, 0, 1))

    env.reset()
    s, ret, t = state(), 0.0, 0
    while t < frames:
        if t < START:
            eps = 1.0
        else:
            eps = max(EPS_END, 1.0 - (1.0 - EPS_END) * (t - START) / EPS_FRAMES)
        if random.random() < eps:
            a = random.randrange(actions)
        else:
            with torch.no_grad():
                q = online(torch.from_numpy(s).float().unsqueeze(0))
            a = int(q.argmax(1).item())
        r, terminal = env.act(a)
        s2 = state()
        obs[at], nxt[at], act[at], rew[at], done[at] = s, s2, a, r, float(terminal)
        at, size = (at + 1) % REPLAY, min(size + 1, REPLAY)
        ret += r
        t += 1
        s = s2
        if terminal:
            print(json.dumps({"frames": t, "return": ret, "secs": time.time() - t0}), flush=True)
            env.reset()
            s, ret = state(), 0.0
        if t > START:
            i = np.random.randint(0, size, BATCH)
            x = torch.from_numpy(obs[i]).float()
            x2 = torch.from_numpy(nxt[i]).float()
            with torch.no_grad():
                best = target(x2).max(1).values
            y = torch.from_numpy(rew[i]) + GAMMA * (1.0 - torch.from_numpy(done[i])) * best
            q = online(x).gather(1, torch.from_numpy(act[i]).unsqueeze(1)).squeeze(1)
            loss = F.smooth_l1_loss(q, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            updates += 1
            if updates % TARGET_EVERY == 0:
                target.load_state_dict(online.state_dict())


if __name__ == "__main__":
    main()
