"""What the unseen trainings share (unseen_trainings.py, unseen_more.py, unseen_four.py): the parts
each times itself by, its line of truth, and the models, step and loop the later sets build on.
Imported after torch, whose import each training times as its start-up."""
import json
import time

import torch

parts = {}


class part:
    """Adds the block's wall time to parts[name]."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t = time.perf_counter()

    def __exit__(self, *a):
        parts[self.name] = parts.get(self.name, 0.0) + time.perf_counter() - self.t


def write_truth(path, scenario, t0, steps, loop_s, without):
    """Appends one JSON line {"scenario", "wall_s", "loop_s", "steps", "parts", "without"}."""
    with open(path, "a") as f:
        f.write(json.dumps({"scenario": scenario, "wall_s": time.perf_counter() - t0, "loop_s": loop_s,
                            "steps": steps, "parts": parts, "without": without}) + "\n")


def mlp(dev, width, depth, norm=False):
    """`depth` Linear layers of `width`, each with GELU (and LayerNorm where `norm`), on `dev`."""
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width)] + ([torch.nn.LayerNorm(width)] if norm else []) + [torch.nn.GELU()]
    return torch.nn.Sequential(*layers).to(dev)


def cnn(dev, classes=10):
    """Two convolutions and a linear head, on `dev`."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 128, 3, padding=1, stride=2),
        torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, classes)).to(dev)


def train(model, opt, x, y):
    """One classification step; returns the loss (a tensor: no read-back)."""
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def loop(body, seconds):
    """Calls body(step) for `seconds`; returns (steps, the loop's own seconds)."""
    steps, t_loop = 0, time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        body(steps)
        steps += 1
    return steps, time.perf_counter() - t_loop
