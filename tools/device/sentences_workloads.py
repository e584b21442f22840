"""Workloads for the diagnosis's sentences on a real GPU: each does one thing whose truth is known.

  grow_exit      GPU memory grows to 41 GiB over ~20 s, then the process exits with status 0
  compute_hold   computes 6 s, then holds 30 GiB doing nothing for 24 s
  busy SECONDS   keeps the GPU busy with matmuls (a process outside the job)
  light SECONDS  a job of small kernels with gaps: it shares the GPU with `busy`
  threads        8 DataLoader workers, each running numpy BLAS on all cores
"""
import sys
import time


def grow_exit():
    import torch
    held = []
    for _ in range(41):
        held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
        time.sleep(0.5)
    time.sleep(3)
    print("peak GiB", torch.cuda.memory_allocated() / 2**30, flush=True)


def compute_hold():
    import torch
    x = torch.randn(8192, 8192, device="cuda")
    t0 = time.time()
    while time.time() - t0 < 6:
        x = (x @ x).clamp_(-1, 1)
    torch.cuda.synchronize()
    hold = torch.empty(30 << 30, dtype=torch.uint8, device="cuda")
    print("holding", hold.numel() / 2**30, "GiB idle", flush=True)
    time.sleep(24)


def busy(seconds):
    import torch
    x = torch.randn(8192, 8192, device="cuda")
    t0 = time.time()
    while time.time() - t0 < seconds:
        x = (x @ x).clamp_(-1, 1)
        torch.cuda.synchronize()


def light(seconds):
    import torch
    x = torch.randn(4096, 4096, device="cuda")
    t0 = time.time()
    while time.time() - t0 < seconds:
        for _ in range(20):
            x = (x @ x).clamp_(-1, 1)
        torch.cuda.synchronize()
        time.sleep(0.01)


class Blas:
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        import numpy as np
        a = np.random.rand(1024, 1024)
        for _ in range(4):
            a = np.tanh(a @ a / 1024)
        return np.float32(a[0, 0])


def threads():
    import torch
    from torch.utils.data import DataLoader
    loader = DataLoader(Blas(), batch_size=8, num_workers=8)
    w = torch.randn(1024, 1024, device="cuda")
    t0 = time.time()
    for b in loader:
        w = w * b.cuda().mean()
        if time.time() - t0 > 40:
            break
    print("done", flush=True)


if __name__ == "__main__":
    what = sys.argv[1]
    if what in ("busy", "light"):
        globals()[what](float(sys.argv[2]))
    else:
        globals()[what]()
