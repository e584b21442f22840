"""A fourth set of trainings written as a user would write them, each timing its own parts: written
after gpulse's rules stood, to check them on mechanisms they were never fitted to. Same protocol
as unseen_trainings.py: one JSON line {"scenario", "wall_s", "loop_s", "steps", "parts",
"without"} appended to TRUTH.
Usage: python3 unseen_four.py SCENARIO SECONDS TRUTH

  amp_healthy  a wide MLP under fp16 autocast and a GradScaler: the GPU is the limit, nothing to fix
  sync_timing  a deep MLP timed each step between two torch.cuda.synchronize() calls
  numpy_aug    a CNN whose batches are blurred and cropped with numpy's FFT in the loop
  fsync_log    an MLP that appends its metrics to a JSON log, flushed and fsync'd every step
  pool_threads an MLP whose predictions are scored by a ThreadPoolExecutor in pure Python
  hf_generate  a small GPT-2 (transformers) trained on tokens, sampling 48 tokens every 8 steps
  compile_mlp  an MLP under torch.compile: the first step compiles
  workers_py   a CNN fed by 3 DataLoader workers whose __getitem__ is pure Python

With UNSEEN_WITHOUT=1 each runs without its culprit: the steps a second without it.
"""
import concurrent.futures
import json
import os
import random
import sys
import tempfile
import time

T0 = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import unseen_parts  # noqa: E402
from unseen_parts import part, parts, train, write_truth  # noqa: E402

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


def amp_healthy():
    model = mlp(8192 // S, 8)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(dev)
    x, y = torch.randn(8192 // S, 8192 // S, device=dev), torch.randint(0, 8192 // S, (8192 // S,), device=dev)

    def body(step):
        with part("train_step"):
            with torch.autocast(dev, dtype=torch.float16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        if step % 20 == 0:
            with part("log"):
                print(f"step {step} loss {loss.item():.4f}", flush=True)

    return loop(body)


def sync_timing():
    model = mlp(1024 // S, 24)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = torch.randn(1024 // S, 1024 // S, device=dev), torch.randint(0, 1024 // S, (1024 // S,), device=dev)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    times = []

    def body(step):
        if not WITHOUT:
            with part("sync"):
                sync()
        t = time.perf_counter()
        with part("train_step"):
            loss = train(model, opt, x, y)
        if not WITHOUT:
            with part("sync"):
                sync()
        times.append(time.perf_counter() - t)
        if step % 100 == 0:
            print(f"step {step} {1000 * np.mean(times[-100:]):.2f} ms/step loss {loss.item():.3f}", flush=True)

    return loop(body)


def numpy_aug():
    model = cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    raw = rng.standard_normal((256 // S, 3, 72, 72)).astype(np.float32)
    kernel = np.exp(-np.add.outer(np.fft.fftfreq(72) ** 2, np.fft.rfftfreq(72) ** 2) * 300.0).astype(np.float32)
    y = torch.randint(0, 10, (256 // S,), device=dev)

    def augment(batch):
        blurred = np.fft.irfft2(np.fft.rfft2(batch) * kernel, s=(72, 72))
        i, j = rng.integers(0, 9, 2)
        crop = blurred[:, :, i:i + 64, j:j + 64]
        crop = np.where(rng.random((len(batch), 1, 1, 1)) < 0.5, crop[..., ::-1], crop)
        return (crop - crop.mean(axis=(2, 3), keepdims=True)) / (crop.std(axis=(2, 3), keepdims=True) + 1e-6)

    fixed = torch.from_numpy(np.ascontiguousarray(augment(raw), dtype=np.float32))

    def body(step):
        with part("augment"):
            xb = fixed if WITHOUT else torch.from_numpy(np.ascontiguousarray(augment(raw), dtype=np.float32))
        with part("train_step"):
            train(model, opt, xb.to(dev), y).item()

    return loop(body)


def fsync_log():
    model = mlp(2048 // S, 6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = torch.randn(2048 // S, 2048 // S, device=dev), torch.randint(0, 2048 // S, (2048 // S,), device=dev)
    d = tempfile.mkdtemp(dir=os.environ.get("UNSEEN_TMP", os.getcwd()))
    log = open(os.path.join(d, "metrics.jsonl"), "a")
    state = np.random.default_rng(0).standard_normal(2 << 20).astype(np.float32)

    def body(step):
        with part("train_step"):
            loss = train(model, opt, x, y).item()
        if not WITHOUT:
            with part("log"):
                log.write(json.dumps({"step": step, "loss": loss, "t": time.time(),
                                      **{f"m{i}": loss * i for i in range(64)}}) + "\n")
                log.flush()
                os.fsync(log.fileno())
                if step % 10 == 0:
                    with open(os.path.join(d, "ema.npy"), "wb") as f:
                        np.save(f, state)
                        f.flush()
                        os.fsync(f.fileno())

    out = loop(body)
    log.close()
    for n in os.listdir(d):
        os.unlink(os.path.join(d, n))
    os.rmdir(d)
    return out


def _precision(args):
    preds, labels, c = args
    tp = fp = 0
    for p, lab in zip(preds, labels):
        if p == c:
            if lab == c:
                tp += 1
            else:
                fp += 1
    return tp / max(tp + fp, 1)


def pool_threads():
    model = mlp(1024 // S, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(8192 // S, 1024 // S, device=dev), torch.randint(0, 32, (8192 // S,), device=dev)
    ex = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="scorer")
    scores = []

    def body(step):
        with part("train_step"):
            out = model(x)[:, :32]
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if not WITHOUT:
            with part("metric"):
                preds, labels = out.argmax(1).tolist(), y.tolist()
                scores.append(sum(ex.map(_precision, [(preds, labels, c) for c in range(32)])) / 32)
        else:
            loss.item()

    out = loop(body)
    ex.shutdown()
    return out


def hf_generate():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=8192, n_positions=512)
    model = GPT2LMHeadModel(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, 8192, (16 // (S // 4 or 1), 256), device=dev)
    prompt = tokens[:4, :16]

    def body(step):
        with part("train_step"):
            model.train()
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = model(tokens, labels=tokens).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if step % 8 == 0 and not WITHOUT:
            with part("generate"):
                model.eval()
                with torch.no_grad():
                    sample = model.generate(prompt, max_new_tokens=48, do_sample=True, top_k=50, pad_token_id=0)
                print(f"step {step} loss {loss.item():.3f} sample {sample[0, -8:].tolist()}", flush=True)
        else:
            loss.item()

    return loop(body)


def compile_mlp():
    model = mlp(2048 // S, 8)
    cmodel = model if WITHOUT else torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = torch.randn(4096 // S, 2048 // S, device=dev), torch.randint(0, 2048 // S, (4096 // S,), device=dev)
    with part("compile"):
        train(cmodel, opt, x, y).item()

    def body(step):
        with part("train_step"):
            train(cmodel, opt, x, y).item()

    return loop(body)


class PyRows(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        rng = random.Random(i)
        row = [rng.gauss(0.0, 1.0) for _ in range(3 * 32 * 32)]
        mean = sum(row) / len(row)
        row = [(v - mean) * 0.5 for v in row]
        return torch.tensor(row, dtype=torch.float32).view(3, 32, 32), i % 10


def workers_py():
    model = cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dl = torch.utils.data.DataLoader(PyRows(), batch_size=128, num_workers=3, shuffle=True, pin_memory=dev == "cuda")
    it = iter(dl)
    fixed = next(it)
    steps, t_loop = 0, time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("next_batch"):
            xb, yb = fixed if WITHOUT else next(it)
        with part("train_step"):
            train(model, opt, xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)).item()
        steps += 1
    return steps, time.perf_counter() - t_loop


steps, loop_s = globals()[scenario]()
parts.setdefault("train_step", 0.0)
write_truth(truth_path, scenario, T0, steps, loop_s, WITHOUT)
os._exit(0)
