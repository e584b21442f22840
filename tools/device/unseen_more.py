"""More trainings written as a user would write them, each timing its own parts: a third set,
written after gpulse's rules stood, to check them on mechanisms they were never fitted to. Same
protocol as unseen_trainings.py: one JSON line {"scenario", "wall_s", "loop_s", "steps", "parts",
"without"} appended to TRUTH.
Usage: python3 unseen_more.py SCENARIO SECONDS TRUTH

  subproc_smi  an MLP that logs the GPU's memory by running nvidia-smi every 4 steps
  queue_thread a CNN fed by a producer thread of the job's own (Python rows into a queue.Queue)
  pil_main     ResNet-18 on JPEG bytes decoded and augmented with PIL in the loop, no DataLoader
  print_tensor an MLP that prints its loss and a row of its predictions (tensors) every step
  grad_stats   a deep MLP that logs every parameter's gradient norm with .item() every step
  ema_python   a deep MLP whose EMA copy is updated by a Python loop over its parameters
  pool_metric  an MLP whose predictions are scored on the CPU by a multiprocessing.Pool each step
  lock_ckpt    ResNet-18 whose checkpoint thread holds a threading.Lock the loop takes each step
  loader_30    a small CNN at about 30 steps/s fed by 2 DataLoader workers (run with --instrument)

With UNSEEN_WITHOUT=1 each runs without its culprit: the steps a second without it.
"""
import io
import os
import random
import subprocess
import sys
import threading
import time

T0 = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import unseen_parts  # noqa: E402
from unseen_parts import part, train, write_truth  # noqa: E402

scenario, seconds, truth_path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
WITHOUT = os.environ.get("UNSEEN_WITHOUT") == "1"
dev = os.environ.get("UNSEEN_DEV", "cuda")
# On a machine without a GPU (UNSEEN_DEV=cpu, to try the mechanisms), sizes shrink by S.
S = 1 if dev == "cuda" else 8


def mlp(width, depth, norm=False):
    return unseen_parts.mlp(dev, width, depth, norm)


def cnn(classes=10):
    return unseen_parts.cnn(dev, classes)


def loop(body):
    return unseen_parts.loop(body, seconds)


SMI = (["nvidia-smi", "--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"]
       if dev == "cuda" else ["ps", "-eo", "pid,rss,comm"])


def subproc_smi():
    model = mlp(4096 // S, 6)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(1024 // S, 4096 // S, device=dev), torch.randint(0, 4096 // S, (1024 // S,), device=dev)
    log = []

    def body(step):
        with part("train_step"):
            lv = train(model, opt, x, y).item()
        if step % 4 == 0 and not WITHOUT:
            with part("gpu_log"):
                mem = subprocess.run(SMI, capture_output=True, text=True).stdout
                log.append((step, lv, mem.strip()))

    return loop(body)


def queue_thread():
    import queue

    model = cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    q = queue.Queue(maxsize=4)
    stop = threading.Event()

    def produce():
        rng = random.Random(0)
        while not stop.is_set():
            rows = [[rng.random() for _ in range(3 * 32 * 32)] for _ in range(64)]
            q.put(torch.tensor(rows, dtype=torch.float32).view(64, 3, 32, 32))

    fixed = torch.randn(64, 3, 32, 32)
    if not WITHOUT:
        threading.Thread(target=produce, name="producer", daemon=True).start()
    y = torch.randint(0, 10, (64,), device=dev)

    def body(step):
        with part("wait_batch"):
            xb = fixed if WITHOUT else q.get()
        with part("train_step"):
            train(model, opt, xb.to(dev), y).item()

    out = loop(body)
    stop.set()
    return out


def pil_main():
    import torchvision
    import torchvision.transforms as T
    from PIL import Image

    model = torchvision.models.resnet18().to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    blobs = []
    for _ in range(64 // S):
        b = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(b, format="JPEG", quality=90)
        blobs.append(b.getvalue())
    aug = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ColorJitter(0.3, 0.3, 0.3),
                     T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    once = torch.stack([aug(Image.open(io.BytesIO(b)).convert("RGB")) for b in blobs])
    y = torch.randint(0, 1000, (64 // S,), device=dev)

    def body(step):
        with part("decode_augment"):
            xb = once if WITHOUT else torch.stack([aug(Image.open(io.BytesIO(b)).convert("RGB")) for b in blobs])
        with part("train_step"):
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(xb.to(dev, non_blocking=True)), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()

    return loop(body)


def print_tensor():
    model = mlp(2048 // S, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = torch.randn(512 // S, 2048 // S, device=dev), torch.randint(0, 2048 // S, (512 // S,), device=dev)

    def body(step):
        with part("train_step"):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if not WITHOUT:
            with part("print"):
                print(f"step {step} loss {loss} first logits {out[0, :6]} argmax {out[:4].argmax(1)}", flush=True)

    return loop(body)


def grad_stats():
    model = mlp(512, 48, norm=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = torch.randn(256, 512, device=dev), torch.randint(0, 512, (256,), device=dev)
    hist = []

    def body(step):
        with part("train_step"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
        if not WITHOUT:
            with part("grad_stats"):
                hist.append({n: p.grad.norm().item() for n, p in model.named_parameters()})
        with part("opt_step"):
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()

    return loop(body)


def ema_python():
    import copy

    model = mlp(1024 // S, 32, norm=True)
    ema = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(2048 // S, 1024 // S, device=dev), torch.randint(0, 1024 // S, (2048 // S,), device=dev)

    def body(step):
        with part("train_step"):
            loss = train(model, opt, x, y)
        if not WITHOUT:
            with part("ema"):
                with torch.no_grad():
                    for pe, p in zip(ema.parameters(), model.parameters()):
                        pe.mul_(0.999).add_(p, alpha=0.001)
        with part("log"):
            loss.item()

    return loop(body)


def _auc_of(args):
    scores, labels = args
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(len(scores))
    pos = labels.sum()
    return (ranks[labels].sum() - pos * (pos - 1) / 2) / max(pos * (len(labels) - pos), 1)


def pool_metric():
    import multiprocessing as mp

    model = mlp(2048 // S, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(4096 // S, 2048 // S, device=dev), torch.randint(0, 64, (4096 // S,), device=dev)
    pool = mp.get_context("fork").Pool(4)
    aucs = []

    def body(step):
        with part("train_step"):
            out = model(x)[:, :64]
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if not WITHOUT:
            with part("metric"):
                s, lab = out.detach().float().cpu().numpy(), y.cpu().numpy()
                aucs.append(np.mean(pool.map(_auc_of, [(s[:, c], lab == c) for c in range(64)] * 6)))
        else:
            loss.item()

    out = loop(body)
    pool.terminate()
    return out


def lock_ckpt():
    import tempfile

    import torchvision

    model = torchvision.models.resnet18().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(128 // S, 3, 224, 224, device=dev), torch.randint(0, 1000, (128 // S,), device=dev)
    lock = threading.Lock()
    path = os.path.join(tempfile.mkdtemp(), "last.pt")
    stop = threading.Event()

    def saver():
        while not stop.is_set():
            with lock:
                state = {k: v.to("cpu", copy=True) for k, v in model.state_dict().items()}
                torch.save({"model": state, "opt": opt.state_dict()}, path)
                os.sync()
            time.sleep(0.05)

    if not WITHOUT:
        threading.Thread(target=saver, name="saver", daemon=True).start()

    def body(step):
        with part("lock_wait"):
            lock.acquire()
        try:
            with part("train_step"):
                with torch.autocast(dev, dtype=torch.bfloat16):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                loss.item()
        finally:
            lock.release()

    out = loop(body)
    stop.set()
    return out


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        img = np.random.default_rng(i).standard_normal((3, 256, 256))
        blur = np.fft.irfft2(np.fft.rfft2(img) * KERNEL, s=(256, 256))
        return torch.from_numpy(blur[:, ::4, ::4].astype(np.float32)), i % 10


KERNEL = np.exp(-np.add.outer(np.fft.fftfreq(256) ** 2, np.fft.rfftfreq(256) ** 2) * 200.0)


def loader_30():
    model = cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = Slow()
    dl = torch.utils.data.DataLoader(ds, batch_size=24, num_workers=2, shuffle=True, pin_memory=True,
                                     persistent_workers=True)
    fixed = next(iter(dl)) if WITHOUT else None
    it = iter(dl)
    steps, t_loop = 0, time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("next_batch"):
            xb, yb = fixed if WITHOUT else next(it)
        with part("train_step"):
            for _ in range(6):
                loss = train(model, opt, xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True))
            loss.item()
        steps += 1
    return steps, time.perf_counter() - t_loop


steps, loop_s = globals()[scenario]()
write_truth(truth_path, scenario, T0, steps, loop_s, WITHOUT)
os._exit(0)
