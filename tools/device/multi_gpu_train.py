"""One model, four ways of spreading it over the GPUs, for recording multi-GPU traces.

Usage:
  torchrun --nproc_per_node=2 multi_gpu_train.py ddp SECONDS        # correct DDP
  torchrun --nproc_per_node=2 multi_gpu_train.py misbound SECONDS   # no torch.cuda.set_device
  torchrun --nproc_per_node=2 multi_gpu_train.py uneven SECONDS     # rank 0 gets 4x the data
  python3 multi_gpu_train.py dataparallel SECONDS                   # nn.DataParallel
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def model():
    layers = []
    for _ in range(8):
        layers += [nn.Linear(4096, 4096), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(4096, 10))


def log(**kw):
    print(json.dumps({"t": time.time(), **kw}), flush=True)


def train(net, device, batch, seconds, sync_default_device=False, distributed=False):
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    end = time.time() + seconds
    steps = 0
    while True:
        # Ranks agree on when to stop, or one would wait forever in the next all-reduce.
        go = torch.tensor([1 if time.time() < end else 0], device=device)
        if distributed:
            dist.all_reduce(go, op=dist.ReduceOp.MIN)
        if not go.item():
            break
        x = torch.randn(batch, 4096, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sync_default_device:
            torch.cuda.synchronize()  # the default device: cuda:0 when set_device was never called
        else:
            torch.cuda.synchronize(device)
        steps += 1
    return steps


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    if mode == "dataparallel":
        net = nn.DataParallel(model().cuda())
        log(event="start", mode=mode)
        log(event="end", mode=mode, steps=train(net, "cuda:0", 2048, seconds))
        return
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    device = torch.device(f"cuda:{local}")
    if mode != "misbound":
        torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    net = nn.parallel.DistributedDataParallel(model().to(device), device_ids=[local])
    batch = 1024 if mode != "uneven" else (2048 if rank == 0 else 512)
    log(event="start", mode=mode, rank=rank)
    steps = train(net, device, batch, seconds, sync_default_device=(mode == "misbound"), distributed=True)
    log(event="end", mode=mode, rank=rank, steps=steps)
    dist.barrier(device_ids=[local])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
