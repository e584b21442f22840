"""A training loop shaped like a real one, with a slow dataset: each batch takes DATA_S to load
and each step COMPUTE_S to compute. Prints its own timing as JSON, measured the way gpulse
measures it: from the end of the first step to the end of the last, the share spent in next().

usage: train_loop.py DATA_S COMPUTE_S STEPS [COPY_S [SAVE_EVERY SAVE_S]]

With COPY_S, each batch is copied to the GPU by a blocking `.to("cuda")` that takes COPY_S; with
SAVE_EVERY, `torch.save` of a checkpoint taking SAVE_S follows every SAVE_EVERY-th step.
"""

import json
import sys
import time

import torch
from torch.utils.data import DataLoader

data_s, compute_s, steps = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
copy_s = float(sys.argv[4]) if len(sys.argv) > 4 else None
save_every, save_s = (int(sys.argv[5]), float(sys.argv[6])) if len(sys.argv) > 6 else (0, 0.0)


class SlowDataset:
    def __len__(self):
        return 10**9

    def __getitem__(self, i):
        time.sleep(data_s)
        return i


loader = DataLoader(SlowDataset(), batch_size=1, pin_memory=True)
opt = torch.optim.SGD([], lr=0.1)
waits, copies, saves, ends = [], [], [], []
it = iter(loader)
for k in range(steps):
    t0 = time.time()
    next(it)
    waits.append(time.time() - t0)
    if copy_s is not None:
        t0 = time.time()
        torch.Tensor(copy_s).to("cuda")
        copies.append(time.time() - t0)
    time.sleep(compute_s)
    opt.step()
    ends.append(time.time())
    if save_every and (k + 1) % save_every == 0 and k + 1 < steps:
        t0 = time.time()
        torch.save({"save_s": save_s}, "checkpoint.pt")
        saves.append(time.time() - t0)
span = ends[-1] - ends[0]
truth = {"steps": steps, "data_wait_share_pct": 100.0 * sum(waits[1:]) / span, "steps_per_s": (steps - 1) / span}
if copies:
    truth["copy_s"] = sum(copies[1:])
    truth["copy_share_pct"] = 100.0 * sum(copies[1:]) / span
if saves:
    truth["save_s"] = saves
print(json.dumps(truth))
