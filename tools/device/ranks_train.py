"""A DDP-shaped training on real torch under torchrun, each rank timing its own parts: the
DataLoader's wait, its own extra work, and its collectives. Rank 1's dataset is slower in mode
`loader`; rank 0 saves a checkpoint every fifth step in mode `save`; mode `even` slows no rank.
Usage: torchrun --nproc_per_node=N ranks_train.py TRUTH MODE STEPS [gloo|nccl]
Each rank writes TRUTH.RANK: loop_s, collective_s, data_s, extra_s, steps, pid."""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

truth, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
backend = sys.argv[4] if len(sys.argv) > 4 else "gloo"
dist.init_process_group(backend)
rank = dist.get_rank()
local = int(os.environ.get("LOCAL_RANK", "0"))
dev = torch.device("cuda", local % torch.cuda.device_count())
torch.cuda.set_device(dev)


class Items(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        if mode == "loader" and rank == 1:
            time.sleep(0.005)
        return torch.randn(1024)


model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
loader = iter(DataLoader(Items(), batch_size=8, num_workers=1, persistent_workers=True))
big = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
big["extra"] = torch.randn(64, 1024, 1024)
own = {"collective_s": 0.0, "data_s": 0.0, "extra_s": 0.0}
flat = torch.zeros(1 << 20, device=dev if backend == "nccl" else "cpu")
next(loader)
torch.cuda.synchronize()
t0 = time.perf_counter()
for step in range(steps):
    a = time.perf_counter()
    x = next(loader)
    own["data_s"] += time.perf_counter() - a
    x = x.to(dev)
    for _ in range(8):
        loss = model(x).square().mean()
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    a = time.perf_counter()
    if mode == "save" and rank == 0 and step % 5 == 0:
        torch.save(big, f"{truth}.ckpt")
    own["extra_s"] += time.perf_counter() - a
    a = time.perf_counter()
    dist.all_reduce(flat)
    dist.barrier()
    own["collective_s"] += time.perf_counter() - a
own["loop_s"] = time.perf_counter() - t0
own["steps"] = steps
own["pid"] = os.getpid()
json.dump(own, open(f"{truth}.{rank}", "w"))
dist.destroy_process_group()
