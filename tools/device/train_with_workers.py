"""A short PyTorch training with DataLoader workers, for recording on a GPU machine.

ResNet-18 on random 3x128x128 images, batch 64, bf16 autocast; the dataset does a little CPU work
per item, served by `num_workers` worker processes. Prints one JSON line per event.
Usage: python3 train_with_workers.py SECONDS NUM_WORKERS
"""
import json
import sys
import time

import torch
import torchvision


class Images(torch.utils.data.Dataset):
    def __len__(self):
        return 10**6

    def __getitem__(self, i):
        x = torch.randn(3, 128, 128)
        x = torch.nn.functional.avg_pool2d(x.unsqueeze(0), 3, 1, 1).squeeze(0)  # some CPU work
        return x, i % 10


def main():
    seconds, workers = float(sys.argv[1]), int(sys.argv[2])
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Images(), batch_size=64, num_workers=workers, pin_memory=True)
    print(json.dumps({"event": "start", "t": time.time(), "workers": workers}), flush=True)
    end = time.time() + seconds
    steps = 0
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        if time.time() > end:
            break
    torch.cuda.synchronize()
    print(json.dumps({"event": "end", "t": time.time(), "steps": steps}), flush=True)


if __name__ == "__main__":
    main()
