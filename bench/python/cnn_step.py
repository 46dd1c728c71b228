"""The Nature-CNN work of `rlfleet-bench cnn`, written in PyTorch from Python.

DQN-Nature's network (uint8 [4, 84, 84] scaled by 1/255; convolutions
32 8x8/4, 64 4x4/2, 64 3x3/1; 512 hidden; 6 actions). Two measurements per
batch size, with the thread count the Rust side uses:
- "update": one double-DQN step (target network, Huber loss, gradient-norm
  clip at 10, Adam at 1e-4) on a uint8 batch sampled from a host replay
  (observations and next observations of 2 * max(batch, 256) slots, as
  rlfleet's update samples its replay, each row gathered once into one
  batch buffer with np.take, the fastest NumPy way);
- "infer": greedy actions for a uint8 batch copied from the host (no grad),
  as an inference front answers.
On a GPU (when torch sees one, as rlfleet's libtorch does) the networks
live there and each batch is uploaded as uint8 and converted there, the
rate loop synchronising after every step.
Prints one JSON line per measurement: {"what": W, "batch": B, "per_sec": S,
"device": D}.
Usage: cnn_step.py SECS THREADS BATCH [BATCH ...]
"""

import json
import sys
import time

import numpy as np
import torch
from torch import nn


def nature_cnn(actions=6):
    return nn.Sequential(
        nn.Conv2d(4, 32, 8, 4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, 2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, 1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(3136, 512),
        nn.ReLU(),
        nn.Linear(512, actions),
    )


DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def rate(secs, step):
    warm = time.perf_counter()
    while time.perf_counter() - warm < secs * 0.1:
        step()
    sync()
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < secs:
        step()
        sync()
        n += 1
    return n / (time.perf_counter() - start)


def update(batch, secs):
    torch.manual_seed(0)
    q, q_target = nature_cnn().to(DEVICE), nature_cnn().to(DEVICE)
    q_target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    slots = 2 * max(batch, 256)
    replay_obs = rng.integers(0, 256, (slots, 4, 84, 84), dtype=np.uint8)
    replay_next = rng.integers(0, 256, (slots, 4, 84, 84), dtype=np.uint8)
    actions = torch.randint(0, 6, (batch, 1), device=DEVICE)
    rewards = torch.ones(batch, device=DEVICE)
    discounts = torch.full((batch,), 0.99, device=DEVICE)

    host = np.empty((2 * batch, 4, 84, 84), dtype=np.uint8)

    def step():
        idx = rng.integers(0, slots, batch)
        np.take(replay_obs, idx, axis=0, out=host[:batch])
        np.take(replay_next, idx, axis=0, out=host[batch:])
        both = torch.from_numpy(host).to(DEVICE).float() / 255.0
        obs, nxt = both[:batch], both[batch:]
        q_all = q(both)
        q_sa = q_all[:batch].gather(1, actions).squeeze(1)
        with torch.no_grad():
            best = q_all[batch:].argmax(1, keepdim=True)
            next_q = q_target(nxt).gather(1, best).squeeze(1)
            target = rewards + discounts * next_q
        loss = nn.functional.huber_loss(q_sa, target, delta=1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(q.parameters(), 10.0)
        opt.step()
        del obs

    return rate(secs, step)


def infer(batch, secs):
    torch.manual_seed(0)
    q = nature_cnn().to(DEVICE)
    rng = np.random.default_rng(1)
    host = rng.integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8)

    def step():
        with torch.no_grad():
            x = torch.from_numpy(host).to(DEVICE).float() / 255.0
            q(x).argmax(1).cpu().numpy()

    return rate(secs, step) * batch


def main():
    secs, threads = float(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    for b in sys.argv[3:]:
        for what, f in (("update", update), ("infer", infer)):
            row = {"what": what, "batch": int(b), "per_sec": f(int(b), secs), "device": DEVICE.type}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
