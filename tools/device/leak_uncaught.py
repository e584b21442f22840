"""The fixtures' `leak` workload, with the out-of-memory error left uncaught as most scripts
leave it: PyTorch's traceback goes to stderr, where `gpulse run` catches it.

usage: leak_uncaught.py SECONDS
"""
import json
import sys
import time

import torch
import torch.nn as nn

dev = torch.device("cuda")
layers = []
for _ in range(8):
    layers += [nn.Linear(8192, 8192), nn.GELU()]
model = nn.Sequential(*layers).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
total = 0
t_end = time.time() + float(sys.argv[1])
step = 0
print(json.dumps({"event": "start", "t": time.time()}), flush=True)
while time.time() < t_end:
    x = torch.randn(512, 8192, device=dev)
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)
    opt.step()
    total = total + loss  # the bug: keeps every step's graph alive
    torch.cuda.synchronize()
    print(json.dumps({"step": step, "t": time.time(), "reserved": torch.cuda.memory_reserved()}), flush=True)
    step += 1
    time.sleep(0.05)
