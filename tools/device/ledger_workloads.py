"""Workloads whose wall time is known account by account, for gpulse's ledger and the rules that
name a cause from its mechanism. Each writes its own ground truth (the loop's own timing of each
account) as one JSON line to TRUTH.
Usage: python3 ledger_workloads.py SCENARIO SECONDS TRUTH

  slow_val       PyTorch Lightning with gpulse.LightningCallback: cheap training batches, and a
                 validation every 60 batches whose items are slow (~90 % of the time validating)
  fast_val       control: the same with cheap validation items
  pageable       384 MiB pageable batches from a DataLoader copied with .to("cuda"), a tiny net:
                 nearly all of each step is the copy
  checkpoint     bf16 matmul steps with torch.save of 1.5 GiB every 120 steps
  epoch_short    4 DataLoader workers whose start costs 4 s, persistent_workers=False, epochs of
                 ~4.5 s: two restarts, too few for a period
  compile        torch.compile of an MLP (inductor, no cache), then bf16 steps: start-up compiling
"""
import json
import os
import sys
import time

T_SCRIPT = time.time()

import torch  # noqa: E402

truth = {"t_script": T_SCRIPT, "t_torch_imported": time.time()}


def finish(**kw):
    truth.update(kw)
    with open(sys.argv[3], "a") as f:
        f.write(json.dumps({"scenario": sys.argv[1], **truth}) + "\n")


class Items(torch.utils.data.Dataset):
    """`n` items of 64 floats, each costing `sleep_s` to produce."""

    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.randn(64), i % 10


def lightning_val(seconds, val_item_s):
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    import gpulse

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(64, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def validation_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-3)

    class Truth(pl.Callback):
        """The loop's own clock: each validation, and the training steps."""

        def __init__(self):
            self.val, self.v0, self.steps, self.t_first, self.t_last = [], None, 0, None, None

        def on_validation_start(self, *a):
            self.v0 = time.time()

        def on_validation_end(self, *a):
            self.val.append([self.v0, time.time()])

        def on_train_batch_end(self, *a):
            self.steps += 1
            self.t_last = time.time()
            self.t_first = self.t_first or self.t_last

    train = torch.utils.data.DataLoader(Items(64 * 10_000, 0.0), batch_size=64, num_workers=0)
    val = torch.utils.data.DataLoader(Items(64 * 50, val_item_s), batch_size=64, num_workers=0)
    t = Truth()
    t_fit = time.time()
    trainer = pl.Trainer(
        accelerator="gpu", devices=1, max_time={"seconds": seconds}, max_epochs=1, val_check_interval=60,
        limit_val_batches=50, num_sanity_val_steps=0, callbacks=[gpulse.LightningCallback(), t],
        enable_progress_bar=False, logger=False, enable_checkpointing=False, default_root_dir="/tmp/gpulse-pl",
    )
    trainer.fit(Net(), train, val)
    t_end = time.time()
    finish(steps=t.steps, t_first_step=t.t_first, t_last_step=t.t_last, t_fit=t_fit, t_end=t_end,
           validations=t.val, validation_s=sum(b - a for a, b in t.val))


class Big(torch.utils.data.Dataset):
    """The same 384 MiB pageable tensor as every item (batch_size=None: no collate)."""

    def __init__(self):
        self.x = torch.randn(96 * 2**20)  # 384 MiB of float32

    def __len__(self):
        return 10**6

    def __getitem__(self, i):
        return self.x


def pageable(seconds):
    loader = torch.utils.data.DataLoader(Big(), batch_size=None, num_workers=0, pin_memory=False)
    w = torch.randn(1024, 16, device="cuda")
    copies, steps, t_first = [], 0, None
    end = time.time() + seconds
    for x in loader:
        t0 = time.time()
        xd = x.to("cuda")
        torch.cuda.synchronize()
        copies.append([t0, time.time()])
        (xd[: 1024 * 1024].view(-1, 1024) @ w).sum().item()
        steps += 1
        t_first = t_first or time.time()
        if time.time() > end:
            break
    t_last = time.time()
    span = t_last - t_first
    finish(steps=steps, t_first_step=t_first, t_last_step=t_last, copies=len(copies),
           copy_s=sum(b - a for a, b in copies), copy_share=sum(b - a for a, b in copies[1:]) / span,
           mib_per_step=384)


def checkpoint(seconds):
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(6)]).cuda()  # 1.5 GiB fp32
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(512, 8192, device="cuda")
    saves, steps, t_first = [], 0, None
    path = os.path.join(os.environ.get("CKPT_DIR", "/tmp"), "gpulse-ckpt.pt")
    end = time.time() + seconds
    while time.time() < end:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        steps += 1
        if steps % 120 == 0:
            torch.cuda.synchronize()
            t0 = time.time()
            torch.save(model.state_dict(), path)
            saves.append([t0, time.time()])
        t_first = t_first or time.time()
    torch.cuda.synchronize()
    os.unlink(path)
    finish(steps=steps, t_first_step=t_first, t_last_step=time.time(), saves=saves,
           save_s=sum(b - a for a, b in saves))


def slow_start(_):
    time.sleep(4.0)


def epoch_short(seconds):
    loader = torch.utils.data.DataLoader(Items(64 * 40, 0.0), batch_size=64, num_workers=4,
                                         persistent_workers=False, worker_init_fn=slow_start)
    net = torch.nn.Linear(64, 10).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    epochs, waited, steps, t_first = [], 0.0, 0, None
    end = time.time() + seconds
    while time.time() < end:
        t_epoch = time.time()
        first = None
        t0 = time.time()
        for x, y in loader:
            w = time.time() - t0
            waited += w
            first = w if first is None else first
            loss = torch.nn.functional.cross_entropy(net(x.cuda()), y.cuda())
            loss.backward()
            opt.step()
            opt.zero_grad()
            time.sleep(0.012)
            steps += 1
            t_first = t_first or time.time()
            t0 = time.time()
        epochs.append([t_epoch, first])
    finish(steps=steps, t_first_step=t_first, t_last_step=time.time(), data_wait_s=waited,
           epoch_starts_and_waits_s=epochs)


def compiled(seconds):
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/gpulse-inductor-%d" % os.getpid())
    net = torch.nn.Sequential(*[m for _ in range(8) for m in (torch.nn.Linear(4096, 4096), torch.nn.GELU())]).cuda()
    net = torch.compile(net)
    opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    x = torch.randn(1024, 4096, device="cuda")
    t_compile = time.time()
    steps, t_first = 0, None
    end = None
    while end is None or time.time() < end:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = net(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        steps += 1
        if t_first is None:
            torch.cuda.synchronize()
            t_first = time.time()
            end = t_first + seconds
    torch.cuda.synchronize()
    finish(steps=steps, t_compile_start=t_compile, t_first_step=t_first, t_last_step=time.time())


if __name__ == "__main__":
    name, secs = sys.argv[1], float(sys.argv[2])
    {
        "slow_val": lambda s: lightning_val(s, 0.002),
        "fast_val": lambda s: lightning_val(s, 0.0),
        "pageable": pageable,
        "pageable_plain": pageable,
        "checkpoint": checkpoint,
        "epoch_short": epoch_short,
        "compile": compiled,
    }[name](secs)
