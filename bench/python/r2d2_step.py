"""The R2D2 sequence update of `rlfleet-bench r2d2`, written in PyTorch from Python.

Same network as rlfleet's (OBS -> HIDDEN ReLU -> nn.LSTM(CORE) -> ACTIONS),
the same update: each of BATCH sequences burned in over BURN steps from a
stored state through the online and target networks without gradient,
then UNROLL training steps and a bootstrap observation; n-step double-Q
targets under the value rescaling h (eps 1e-3) and its inverse, a masked
squared loss weighted by importance weights, priorities
0.9 max|d| + 0.1 mean|d| copied back to the host, a gradient-norm clip at
40 and Adam (eps 1e-3); one intra-op thread, the sampled batch's host
arrays copied in each step as a replay sample would be. Prints one JSON
line: {"steps_per_sec": S, "device": D}, on the GPU when torch sees one
(as rlfleet's libtorch does).
Usage: r2d2_step.py SECS OBS HIDDEN CORE ACTIONS BATCH UNROLL BURN
"""

import json
import sys
import time

import numpy as np
import torch
from torch import nn

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self, obs, hidden, core, actions):
        super().__init__()
        self.torso = nn.Sequential(nn.Linear(obs, hidden), nn.ReLU())
        self.lstm = nn.LSTM(hidden, core)
        self.head = nn.Linear(core, actions)

    def forward(self, x, state):
        out, state = self.lstm(self.torso(x), state)
        return self.head(out), state


def h(x, eps=1e-3):
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def h_inv(x, eps=1e-3):
    root = torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps))
    return torch.sign(x) * (((root - 1.0) / (2.0 * eps)) ** 2 - 1.0)


def rate(secs, step):
    warm = time.perf_counter()
    while time.perf_counter() - warm < secs * 0.1:
        step()
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < secs:
        for _ in range(4):
            step()
        n += 4
    return n / (time.perf_counter() - start)


def bench(secs, obs, hidden, core, actions, b, unroll, burn):
    torch.manual_seed(0)
    online = Net(obs, hidden, core, actions).to(DEVICE)
    target = Net(obs, hidden, core, actions).to(DEVICE)
    target.load_state_dict(online.state_dict())
    opt = torch.optim.Adam(online.parameters(), lr=1e-4, eps=1e-3)
    d = {"device": DEVICE}
    x_burn = torch.randn(burn, b, obs, **d)
    x_main = torch.randn(unroll + 1, b, obs, **d)
    state = (torch.zeros(1, b, core, **d), torch.zeros(1, b, core, **d))
    acts = torch.randint(0, actions, (unroll, b, 1), **d)
    returns = torch.rand(unroll, b, **d)
    disc = torch.full((unroll, b), 0.99**5, **d)
    boot = torch.clamp(torch.arange(unroll, **d) + 5, max=unroll)
    mask = torch.ones(unroll, b, **d)
    weights = torch.rand(b, **d)
    # What the replay hands over each step: observations, actions, rewards,
    # states, the per-step target arrays.
    host = np.full((burn + unroll + 1) * b * obs + 6 * unroll * b + 2 * b * core, 0.5, dtype=np.float32)

    def step():
        torch.tensor(host).to(DEVICE)
        with torch.no_grad():
            s_on = online(x_burn, state)[1] if burn else state
            s_tg = target(x_burn, state)[1] if burn else state
        q, _ = online(x_main, s_on)
        q_sa = q[:unroll].gather(2, acts).squeeze(2)
        with torch.no_grad():
            q_t, _ = target(x_main, s_tg)
            best = q.detach()[boot].argmax(2, keepdim=True)
            q_boot = q_t[boot].gather(2, best).squeeze(2)
            tgt = h(returns + disc * h_inv(q_boot))
        delta = (q_sa - tgt) * mask
        per_seq = (0.5 * delta**2).sum(0) / mask.sum(0)
        loss = (per_seq * weights).mean()
        with torch.no_grad():
            d = delta.abs()
            prio = 0.9 * d.amax(0) + 0.1 * d.sum(0) / mask.sum(0)
        prio.cpu().numpy()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), 40.0)
        opt.step()

    return rate(secs, step)


def main():
    torch.set_num_threads(1)
    secs = float(sys.argv[1])
    obs, hidden, core, actions, b, unroll, burn = (int(a) for a in sys.argv[2:9])
    rate_ = bench(secs, obs, hidden, core, actions, b, unroll, burn)
    print(json.dumps({"steps_per_sec": rate_, "device": DEVICE.type}), flush=True)


if __name__ == "__main__":
    main()
