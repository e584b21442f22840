"""Trainings written as a user would write them (not one mechanism each), each timing its own
parts: the ground truth for what gpulse says is slow. None of them marks its steps or imports
gpulse. Each appends one JSON line {"scenario", "wall_s", "loop_s", "steps", "parts": {name: s}}
to TRUTH.
Usage: python3 unseen_trainings.py SCENARIO SECONDS TRUTH

  tokenize    a small GPT-2 (transformers) fed by a pure-Python tokenizer in the loop, with
              loss.item() logged every step
  augment     torchvision ResNet-18 on PIL images with heavy augmentation, 3 DataLoader workers
  metrics     an MLP whose predictions go to the CPU every step for a numpy ranking metric
  gil_thread  a small CNN while a log-shipping thread of the job's own runs Python without pause
  eval_inline an MLP validated every 40 steps on a dataset whose items are parsed in Python
  launch      a deep, narrow MLP at batch 16: the host launching kernels is the whole step
  loader0     ResNet-18 fed by a DataLoader with num_workers=0 and PIL augmentation
  history_log an MLP whose whole loss history is dumped to JSON every step
  hf_trainer  transformers' Trainer on a small BERT, logging every step (no parts timed)
  ckpt        ResNet-18 on batches already on the GPU, saving its state_dict every 8 steps
  empty_cache an MLP fed batches of varying size that calls torch.cuda.empty_cache() every step
  gc_heavy    an MLP whose job keeps a large graph of Python records and runs gc.collect() each step
  pageable    a CNN fed from numpy arrays built in the loop and copied from pageable memory
  cpu_interp  a CNN whose batches are resized on the CPU with F.interpolate in the loop

With UNSEEN_WITHOUT=1, ckpt, empty_cache, gc_heavy, cpu_interp and pageable run without their
culprit (no save, no empty_cache, no gc.collect, the batch resized or drawn once before the
loop): the steps a second without it, against which a finding's "N× more steps/s" is checked.
"""
import json
import os
import random
import sys
import threading
import time

T0 = time.perf_counter()
import torch  # noqa: E402
from unseen_parts import part, parts, write_truth  # noqa: E402

scenario, seconds, truth_path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
WITHOUT = os.environ.get("UNSEEN_WITHOUT") == "1"
dev = "cuda"


WORDS = [f"w{i}" for i in range(4000)]


def encode(texts, vocab, length):
    """A tokenizer written in Python: split, look up, pad."""
    out = []
    for t in texts:
        ids = [vocab.get(w, 1) for w in t.split()][:length]
        out.append(ids + [0] * (length - len(ids)))
    return torch.tensor(out)


def tokenize():
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=4002, n_positions=256, n_embd=256, n_layer=4, n_head=4)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = {w: i + 2 for i, w in enumerate(WORDS)}
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("make_text"):
            texts = [" ".join(random.choices(WORDS, k=200)) for _ in range(48)]
        with part("encode"):
            ids = encode(texts, vocab, 192).to(dev)
        with part("train_step"):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            print(f"step {steps} loss {loss.item():.3f}", file=open("/dev/null", "w"))
        steps += 1
    return steps, time.perf_counter() - t_loop


class Pictures(torch.utils.data.Dataset):
    def __init__(self, n, transform):
        import numpy as np
        from PIL import Image

        rng = np.random.default_rng(0)
        self.images = [Image.fromarray(rng.integers(0, 255, (288, 288, 3), dtype=np.uint8)) for _ in range(64)]
        self.n, self.transform = n, transform

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.transform(self.images[i % 64]), i % 1000


def augment():
    import torchvision
    from torchvision import transforms as T

    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4, 0.1),
                    T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    loader = torch.utils.data.DataLoader(Pictures(100000, tf), batch_size=64, num_workers=3, pin_memory=True,
                                         persistent_workers=True, shuffle=True)
    model = torchvision.models.resnet18().to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    steps = 0
    it = iter(loader)
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("next_batch"):
            x, y = next(it)
        with part("train_step"):
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
        steps += 1
    return steps, time.perf_counter() - t_loop


def ranking_metric(scores, labels):
    """Mean per-class AUC by ranks, in numpy."""
    import numpy as np

    aucs = []
    for c in range(scores.shape[1]):
        order = np.argsort(scores[:, c])
        ranks = np.empty_like(order)
        ranks[order] = np.arange(len(order))
        pos = labels == c
        n_pos = pos.sum()
        if 0 < n_pos < len(labels):
            aucs.append((ranks[pos].sum() - n_pos * (n_pos - 1) / 2) / (n_pos * (len(labels) - n_pos)))
    return float(np.mean(aucs))


def metrics():
    import numpy as np

    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 100)).to(dev)
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(4096, 512, device=dev)
    y = torch.randint(0, 100, (4096,), device=dev)
    history_s, history_y = [], []
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("train_step"):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        with part("to_cpu"):
            history_s.append(out.softmax(-1).detach().cpu().numpy())
            history_y.append(y.cpu().numpy())
        with part("metric"):
            ranking_metric(np.concatenate(history_s[-12:]), np.concatenate(history_y[-12:]))
        steps += 1
    return steps, time.perf_counter() - t_loop


def gil_thread():
    stop = threading.Event()

    def ship_logs():
        record = {"host": "node-1", "values": list(range(200)), "tags": {f"k{i}": i for i in range(50)}}
        while not stop.is_set():
            json.loads(json.dumps(record))

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(32, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 3, 64, 64, device=dev)
    y = torch.randint(0, 10, (32,), device=dev)
    shipper = threading.Thread(target=ship_logs, daemon=True)
    shipper.start()
    steps = 0
    cpu0 = time.thread_time()
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if steps % 10 == 0:
            with part("item"):
                loss.item()
        steps += 1
    loop_s = time.perf_counter() - t_loop
    parts["main_thread_cpu"] = time.thread_time() - cpu0
    # What the main thread spent neither on a CPU nor in its one sync: waiting for the GIL.
    parts["off_cpu_not_sync"] = loop_s - parts["main_thread_cpu"] - parts.get("item", 0.0)
    stop.set()
    return steps, loop_s


class Rows(torch.utils.data.Dataset):
    """Rows kept as text and parsed on every read."""

    def __init__(self, n):
        self.rows = [",".join(f"{random.random():.6f}" for _ in range(256)) for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return torch.tensor([float(v) for v in self.rows[i].split(",")]), i % 10


def eval_inline():
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters())
    val = torch.utils.data.DataLoader(Rows(2560), batch_size=128)
    x = torch.randn(2048, 256, device=dev)
    y = torch.randint(0, 10, (2048,), device=dev)
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("train_step"):
            for _ in range(4):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
            loss.item()
        steps += 1
        if steps % 40 == 0:
            with part("validate"):
                model.eval()
                correct = 0
                with torch.no_grad():
                    for vx, vy in val:
                        correct += (model(vx.to(dev)).argmax(-1).cpu() == vy).sum().item()
                model.train()
    return steps, time.perf_counter() - t_loop


def launch():
    layers = []
    for _ in range(60):
        layers += [torch.nn.Linear(128, 128), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(16, 128, device=dev)
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("train_step"):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        if steps % 50 == 0:
            with part("item"):
                loss.item()
        steps += 1
    torch.cuda.synchronize()
    return steps, time.perf_counter() - t_loop


def loader0():
    import torchvision
    from torchvision import transforms as T

    tf = T.Compose([T.RandomResizedCrop(160), T.RandomHorizontalFlip(), T.ToTensor()])
    loader = torch.utils.data.DataLoader(Pictures(100000, tf), batch_size=32, num_workers=0, shuffle=True)
    model = torchvision.models.resnet18().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    it = iter(loader)
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("next_batch"):
            x, y = next(it)
        with part("train_step"):
            loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
            loss.backward()
            opt.step()
            opt.zero_grad()
            loss.item()
        steps += 1
    return steps, time.perf_counter() - t_loop


def history_log():
    import os
    import tempfile

    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    x = torch.randn(8192, 1024, device=dev)
    history = []
    path = os.path.join(tempfile.gettempdir(), "unseen_history.json")
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("train_step"):
            for _ in range(3):
                loss = model(x).square().mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
            value = loss.item()
        with part("log"):
            history.append({"step": steps, "loss": value, "lr": 1e-3, "tags": [f"t{i}" for i in range(20)]})
            with open(path, "w") as f:
                json.dump(history, f)
        steps += 1
    return steps, time.perf_counter() - t_loop


def hf_trainer():
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    class Rand(torch.utils.data.Dataset):
        def __len__(self):
            return 100000

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return {"input_ids": torch.randint(0, 3000, (128,), generator=g), "labels": i % 2}

    model = BertForSequenceClassification(BertConfig(vocab_size=3000, hidden_size=256, num_hidden_layers=4,
                                                     num_attention_heads=4, intermediate_size=1024))

    from transformers import TrainerCallback

    class Timer(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if time.perf_counter() - self.t > seconds:
                control.should_training_stop = True

    import tempfile

    args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=64, logging_steps=1,
                             report_to=[], save_strategy="no", dataloader_num_workers=0, disable_tqdm=True)
    timer = Timer()
    trainer = Trainer(model=model, args=args, train_dataset=Rand(), callbacks=[timer])
    t0 = time.perf_counter()
    out = trainer.train()
    return out.global_step, time.perf_counter() - t0


def _mlp(width=4096, depth=6):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers).to(dev)


def _step(model, opt, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def _ce_step(model, opt, x, y, amp=True):
    """One classification step in BF16 autocast, its loss read back (the user's logging)."""
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def ckpt():
    import os
    import tempfile

    import torchvision

    model = torchvision.models.resnet18().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(128, 3, 224, 224, device=dev), torch.randint(0, 1000, (128,), device=dev)
    path = os.path.join(tempfile.mkdtemp(), "last.pt")
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("train_step"):
            lv = _ce_step(model, opt, x, y)
        if steps % 8 == 0 and not WITHOUT:
            with part("checkpoint"):
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "loss": lv}, path)
        steps += 1
    return steps, time.perf_counter() - t_loop


def empty_cache():
    model = _mlp(2048, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        b = random.choice([256, 512, 1024, 2048])
        x = torch.randn(b, 2048, device=dev)
        with part("train_step"):
            _step(model, opt, x, x)
        with part("empty_cache"):
            if not WITHOUT:
                torch.cuda.empty_cache()
        steps += 1
    return steps, time.perf_counter() - t_loop


def gc_heavy():
    import gc

    model = _mlp(4096, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(2048, 4096, device=dev)
    records = []
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("train_step"):
            loss = _step(model, opt, x, x)
            lv = loss.item()
        with part("bookkeeping"):
            records.append({"step": steps, "loss": lv, "tags": [str(steps), {"ok": True}]})
            if len(records) < 400000:
                records.extend({"i": i, "v": [i]} for i in range(4000))
        with part("gc"):
            if not WITHOUT:
                gc.collect()
        steps += 1
    return steps, time.perf_counter() - t_loop


def pageable():
    import numpy as np

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    once = rng.standard_normal((64, 3, 224, 224), dtype=np.float32)
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("make_batch"):
            arr = once if WITHOUT else rng.standard_normal((64, 3, 224, 224), dtype=np.float32)
        with part("copy"):
            xb = torch.from_numpy(arr).cuda()
        with part("train_step"):
            _ce_step(model, opt, xb, torch.zeros(64, dtype=torch.long, device=dev), amp=False)
        steps += 1
    return steps, time.perf_counter() - t_loop


def cpu_interp():
    import torch.nn.functional as F
    import torchvision

    torch.set_num_threads(4)
    model = torchvision.models.resnet18().to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    raw = torch.rand(96, 3, 320, 320)
    y = torch.randint(0, 1000, (96,), device=dev)
    once = F.interpolate(raw, size=(224, 224), mode="bicubic", align_corners=False)
    steps = 0
    t_loop = time.perf_counter()
    while time.perf_counter() - t_loop < seconds:
        with part("resize"):
            xb = once if WITHOUT else F.interpolate(raw, size=(224, 224), mode="bicubic", align_corners=False)
        with part("train_step"):
            _ce_step(model, opt, xb.to(dev, non_blocking=True), y)
        steps += 1
    return steps, time.perf_counter() - t_loop


steps, loop_s = globals()[scenario]()
write_truth(truth_path, scenario, T0, steps, loop_s, WITHOUT)
