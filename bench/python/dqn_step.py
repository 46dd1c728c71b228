"""The DQN update of `rlfleet-bench dqn`, written in PyTorch from Python.

Same network (4 -> 64 -> 64 -> 2, ReLU), the same double-DQN target with a
target network, Huber loss, gradient-norm clip at 10 and Adam at 1e-3 as
the Rust baselines, one intra-op thread, a host batch copied in each step
as a replay sample would be. Prints one JSON line per batch size:
{"batch": B, "steps_per_sec": S}. Usage: dqn_step.py SECS BATCH [BATCH ...]
"""

import json
import sys
import time

import numpy as np
import torch
from torch import nn


def mlp():
    return nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))


def rate(secs, step):
    warm = time.perf_counter()
    while time.perf_counter() - warm < secs * 0.1:
        step()
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < secs:
        for _ in range(16):
            step()
        n += 16
    return n / (time.perf_counter() - start)


def bench(batch, secs):
    torch.manual_seed(0)
    q, q_target = mlp(), mlp()
    q_target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    obs = torch.randn(batch, 4)
    nxt = torch.randn(batch, 4)
    actions = torch.randint(0, 2, (batch, 1))
    rewards = torch.ones(batch)
    done = torch.zeros(batch)
    host = np.full(batch * 11, 0.5, dtype=np.float32)

    def step():
        torch.tensor(host)
        q_sa = q(obs).gather(1, actions).squeeze(1)
        with torch.no_grad():
            best = q(nxt).argmax(1, keepdim=True)
            next_q = q_target(nxt).gather(1, best).squeeze(1)
            target = rewards + (1.0 - done) * next_q * 0.99
        loss = nn.functional.huber_loss(q_sa, target, delta=1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(q.parameters(), 10.0)
        opt.step()

    return rate(secs, step)


def main():
    torch.set_num_threads(1)
    secs = float(sys.argv[1])
    for b in sys.argv[2:]:
        print(json.dumps({"batch": int(b), "steps_per_sec": bench(int(b), secs)}), flush=True)


if __name__ == "__main__":
    main()
