"""A training loop shaped like a real one, with a slow dataset: each batch takes DATA_S to load
and each step COMPUTE_S to compute. Prints its own timing as JSON, measured the way gpulse
measures it: from the end of the first step to the end of the last, the share spent in next().

usage: train_loop.py DATA_S COMPUTE_S STEPS
"""

import json
import sys
import time

import torch
from torch.utils.data import DataLoader

data_s, compute_s, steps = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])


class SlowDataset:
    def __len__(self):
        return 10**9

    def __getitem__(self, i):
        time.sleep(data_s)
        return i


loader = DataLoader(SlowDataset(), batch_size=1)
opt = torch.optim.SGD([], lr=0.1)
waits, ends = [], []
it = iter(loader)
for _ in range(steps):
    t0 = time.time()
    next(it)
    waits.append(time.time() - t0)
    time.sleep(compute_s)
    opt.step()
    ends.append(time.time())
span = ends[-1] - ends[0]
print(json.dumps({"steps": steps, "data_wait_share_pct": 100.0 * sum(waits[1:]) / span, "steps_per_s": (steps - 1) / span}))
