"""GPU load phases for verifying gpulse on a real GPU.

Phases (seconds): bf16 matmul (tensor cores busy), then a single-SM spin kernel
(`torch.cuda._sleep`: GPU-Util reads high while almost every SM idles), then exit.
Prints one JSON line per phase change with the wall time.
"""
import json, sys, time
import torch

matmul_s, spin_s = float(sys.argv[1]), float(sys.argv[2])
dev = torch.device("cuda")
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
print(json.dumps({"phase": "matmul", "t": time.time()}), flush=True)
end = time.time() + matmul_s
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
print(json.dumps({"phase": "spin", "t": time.time()}), flush=True)
end = time.time() + spin_s
while time.time() < end:
    torch.cuda._sleep(50_000_000)
    torch.cuda.synchronize()
print(json.dumps({"phase": "end", "t": time.time()}), flush=True)
