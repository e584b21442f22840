"""What `gpulse run --instrument`'s copy timing costs each `.to()` call: ns per call for a tensor
already on the GPU (the hook returns at once), and for a 4 KiB host tensor copied to the GPU (the
hook times it). Run plain and under `gpulse run --instrument`; prints one JSON line.
Usage: python3 copy_hook_cost.py"""
import json
import time

import torch

on_gpu = torch.zeros(1024, device="cuda")
on_host = torch.zeros(1024)
for _ in range(1000):  # warm both paths
    on_gpu.to("cuda")
    on_host.to("cuda")
torch.cuda.synchronize()


def per_call_ns(t, n):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            t.to("cuda")
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


print(json.dumps({
    "hooked": getattr(torch.Tensor.to, "_gpulse", False),
    "gpu_tensor_ns": per_call_ns(on_gpu, 100_000),
    "host_4kib_copy_ns": per_call_ns(on_host, 10_000),
}))
