"""Workloads with a known bottleneck for gpulse's diagnosis, each beside a control that must not
show it. Each writes its own ground truth (the loop's timing) as one JSON line to TRUTH.
Usage: python3 diagnosis_workloads.py SCENARIO SECONDS TRUTH

  transfer_pageable  2 GiB pageable host->device copy per step, then ~40 ms of bf16 matmuls
  transfer_pinned    control: the same copies from pinned memory, non_blocking on a side stream
                     that prefetches the next while the matmuls run
  epoch_restart      DataLoader, 4 workers whose start costs 3 s (worker_init_fn), epochs of
                     ~5 s, persistent_workers=False: the GPU stops at every epoch start
  epoch_persistent   control: persistent_workers=True
  fp32_matmul        8192^2 fp32 matmuls with TF32 off: SMs busy, tensor cores idle
  bf16_matmul        control: the same under bf16 torch.autocast
  starved_loader     4 workers with CPU-heavy items and a small model (run beside CPU burners)
  gpu_bound          control: a bf16 matmul loop (run beside the same burners)
  lightning          PyTorch Lightning with gpulse.LightningCallback, num_workers=0, CPU-heavy items
  hf                 Hugging Face Trainer with gpulse.HFCallback, 4 workers that keep up
"""
import json
import sys
import time

T_SCRIPT = time.time()

import torch  # noqa: E402

T_IMPORTED = time.time()
truth = {"t_script": T_SCRIPT, "t_torch_imported": T_IMPORTED}


def finish(**kw):
    truth.update(kw)
    with open(sys.argv[3], "a") as f:
        f.write(json.dumps({"scenario": sys.argv[1], **truth}) + "\n")


def matmuls(a, n):
    for _ in range(n):
        a = torch.tanh(a @ a)
    return a


def transfer(seconds, pinned):
    host = torch.ones(512 * 2**20)  # 2 GiB of float32
    if pinned:
        host = host.pin_memory()
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) / 90
    dev = [torch.empty_like(host, device="cuda") for _ in range(2)]
    side = torch.cuda.Stream()
    steps, copy_s, t_first = 0, 0.0, None
    end = time.time() + seconds
    k = 0
    while time.time() < end:
        t0 = time.time()
        if pinned:
            with torch.cuda.stream(side):  # the next step's batch, behind this step's compute
                dev[(k + 1) % 2].copy_(host, non_blocking=True)
            x = dev[k % 2]
        else:
            x = host.to("cuda")
            torch.cuda.synchronize()
            copy_s += time.time() - t0
        a = matmuls(a, 25) + x[:1].to(torch.bfloat16).mean() * 0
        torch.cuda.synchronize()
        torch.cuda.current_stream().wait_stream(side)
        steps += 1
        k += 1
        t_first = t_first or time.time()
    finish(steps=steps, t_first_step=t_first, copy_share=copy_s / seconds, gib_per_step=2.0)


class Slow(torch.utils.data.Dataset):
    """Items that cost `cost` matmuls of 96^2 on the CPU each."""

    def __init__(self, n, cost):
        self.n, self.cost = n, cost

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = torch.randn(96, 96)
        for _ in range(self.cost):
            x = torch.tanh(x @ x / 96)
        return x.flatten()[:64], i % 10


def slow_start(_worker_id):
    time.sleep(3.0)  # opening shards, loading an index: what a heavy worker start costs
    torch.set_num_threads(1)


def epochs(seconds, persistent):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) / 90
    data = Slow(300 * 64, 0)  # ~5 s of ~17 ms steps per epoch
    loader = torch.utils.data.DataLoader(
        data, batch_size=64, num_workers=4, persistent_workers=persistent, worker_init_fn=slow_start
    )
    steps, waits, epoch_waits, t_first = 0, 0.0, [], None
    end = time.time() + seconds
    while time.time() < end:
        t_wait = time.time()
        first = True
        for x, _ in loader:
            w = time.time() - t_wait
            waits += w
            if first:
                epoch_waits.append([round(t_wait, 2), round(w, 2)])
                first = False
            a = matmuls(a, 10) + x.cuda().mean().to(torch.bfloat16) * 0
            torch.cuda.synchronize()
            steps += 1
            t_first = t_first or time.time()
            t_wait = time.time()
            if time.time() > end:
                break
    finish(steps=steps, t_first_step=t_first, data_wait_s=waits, epoch_starts_and_waits_s=epoch_waits)


def matmul_precision(seconds, bf16):
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(8192, 8192, device="cuda") / 90
    steps, t_first = 0, None
    end = time.time() + seconds
    while time.time() < end:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            for _ in range(10):
                a = torch.tanh(a @ a).float()
        torch.cuda.synchronize()
        steps += 1
        t_first = t_first or time.time()
    finish(steps=steps, t_first_step=t_first, step_ms=1000 * seconds / max(steps, 1))


def starved(seconds):
    model = torch.nn.Linear(64, 10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(Slow(10**6, 30), batch_size=64, num_workers=4)
    steps, waits, t_first = 0, 0.0, None
    end = time.time() + seconds
    t_wait = time.time()
    for x, y in loader:
        waits += time.time() - t_wait
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch.cuda.synchronize()
        steps += 1
        t_first = t_first or time.time()
        if time.time() > end:
            break
        t_wait = time.time()
    finish(steps=steps, t_first_step=t_first, data_wait_s=waits)


def gpu_bound(seconds):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) / 90
    steps, t_first = 0, None
    end = time.time() + seconds
    while time.time() < end:
        a = matmuls(a, 20)
        torch.cuda.synchronize()
        steps += 1
        t_first = t_first or time.time()
    finish(steps=steps, t_first_step=t_first)


class Timed(Slow):
    """Slow, timing each item in the process that loads it (the truth with num_workers=0)."""

    spent_s = 0.0

    def __getitem__(self, i):
        t = time.time()
        try:
            return super().__getitem__(i)
        finally:
            Timed.spent_s += time.time() - t


def lightning(seconds):
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    import gpulse

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10))

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def validation_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-3)

    class Pace(pl.Callback):
        def __init__(self):
            self.steps, self.t_first, self.t_last = 0, None, None

        def on_train_batch_end(self, *a):
            self.steps += 1
            self.t_last = time.time()
            self.t_first = self.t_first or self.t_last

    train = torch.utils.data.DataLoader(Timed(64 * 120, 12), batch_size=64, num_workers=0)
    val = torch.utils.data.DataLoader(Slow(64 * 10, 12), batch_size=64, num_workers=0)
    pace = Pace()
    trainer = pl.Trainer(
        accelerator="gpu", devices=1, max_time={"seconds": seconds}, max_epochs=100,
        callbacks=[gpulse.LightningCallback(), pace], enable_progress_bar=False, logger=False,
        default_root_dir="/tmp/gpulse-pl",
    )
    trainer.fit(Net(), train, val)
    span = (pace.t_last or 0) - (pace.t_first or 0)
    finish(steps=pace.steps, t_first_step=pace.t_first, steps_per_s=(pace.steps - 1) / max(span, 1e-9),
           train_items_s=Timed.spent_s, epochs=trainer.current_epoch)


def hf(seconds):
    import gpulse
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)])

        def forward(self, x, labels=None):
            out = self.net(x.repeat(1, 32))
            return {"loss": out.square().mean(), "logits": out[:, :10]}

    class Items(torch.utils.data.Dataset):
        def __init__(self, n):
            self.inner = Slow(n, 2)

        def __len__(self):
            return len(self.inner)

        def __getitem__(self, i):
            x, y = self.inner[i]
            return {"x": x, "labels": y}

    class Pace(TrainerCallback):
        def __init__(self):
            self.steps, self.t_first, self.t_last = 0, None, None

        def on_step_end(self, *a, **k):
            self.steps += 1
            self.t_last = time.time()
            self.t_first = self.t_first or self.t_last

    pace = Pace()
    args = TrainingArguments(
        output_dir="/tmp/gpulse-hf", per_device_train_batch_size=64, num_train_epochs=100,
        max_steps=-1, save_strategy="epoch", eval_strategy="epoch", logging_steps=50, report_to=[],
        dataloader_num_workers=4, bf16=True, remove_unused_columns=False, disable_tqdm=True,
    )
    trainer = Trainer(model=Net(), args=args, train_dataset=Items(64 * 2000), eval_dataset=Items(64 * 20),
                      callbacks=[gpulse.HFCallback(), pace])
    deadline = time.time() + seconds

    class Stop(TrainerCallback):
        def on_step_end(self, args, state, control, **k):
            if time.time() > deadline:
                control.should_training_stop = True

    trainer.add_callback(Stop())
    trainer.train()
    span = (pace.t_last or 0) - (pace.t_first or 0)
    finish(steps=pace.steps, t_first_step=pace.t_first, steps_per_s=(pace.steps - 1) / max(span, 1e-9))


if __name__ == "__main__":
    s, seconds = sys.argv[1], float(sys.argv[2])
    {
        "transfer_pageable": lambda: transfer(seconds, False),
        "transfer_pinned": lambda: transfer(seconds, True),
        "epoch_restart": lambda: epochs(seconds, False),
        "epoch_persistent": lambda: epochs(seconds, True),
        "fp32_matmul": lambda: matmul_precision(seconds, False),
        "bf16_matmul": lambda: matmul_precision(seconds, True),
        "starved_loader": lambda: starved(seconds),
        "gpu_bound": lambda: gpu_bound(seconds),
        "lightning": lambda: lightning(seconds),
        "hf": lambda: hf(seconds),
    }[s]()
