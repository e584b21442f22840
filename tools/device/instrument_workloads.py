"""Training loops for measuring what `gpulse run --instrument` costs the training itself.

Usage: instrument_workloads.py MODE WARM_S MEASURE_S OUT_JSON
MODE: resnet (ResNet-50, bf16, channels-last, a DataLoader with 4 workers over in-memory
uint8 images), transformer (GPT-2 small from its config, bf16, a DataLoader over random
tokens) or tiny (Linear(10, 1) on batches of 32: launch-bound, thousands of steps a second).
The loop runs WARM_S seconds, then counts the steps that end in the next MEASURE_S seconds
(synchronized at both ends) and writes {"mode", "steps", "seconds", "steps_per_s"}.
"""
import json
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

mode, warm_s, measure_s, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
dev = torch.device("cuda")
torch.manual_seed(0)


def batches(loader):
    while True:  # epochs back to back, as a long run has them
        yield from loader


if mode == "resnet":
    import torchvision

    model = torchvision.models.resnet50().to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randint(0, 256, (2048, 3, 224, 224), dtype=torch.uint8)
    labels = torch.randint(0, 1000, (2048,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=128, shuffle=True, num_workers=4,
                        pin_memory=True, persistent_workers=True, drop_last=True)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1) * 255

    def step(batch):
        x, y = batch
        x = ((x.to(dev, non_blocking=True).float() - mean) / std).contiguous(memory_format=torch.channels_last)
        y = y.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
elif mode == "transformer":
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 50257, (1024, 512))
    loader = DataLoader(TensorDataset(tokens), batch_size=16, shuffle=True, num_workers=2,
                        pin_memory=True, persistent_workers=True, drop_last=True)

    def step(batch):
        (x,) = batch
        x = x.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
elif mode == "tiny":
    model = nn.Linear(10, 1).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = None

    def step(_):
        x = torch.randn(32, 10, device=dev)
        y = torch.randn(32, 1, device=dev)
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
else:
    sys.exit(f"unknown mode {mode}")

it = batches(loader) if loader is not None else iter(lambda: None, 0)
end_warm = time.time() + warm_s
while time.time() < end_warm:
    step(next(it))
torch.cuda.synchronize()
t0 = time.time()
n = 0
while time.time() - t0 < measure_s:
    step(next(it))
    n += 1
torch.cuda.synchronize()
secs = time.time() - t0
with open(out, "w") as f:
    json.dump({"mode": mode, "steps": n, "seconds": secs, "steps_per_s": n / secs}, f)
