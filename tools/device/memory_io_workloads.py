"""Workloads for what gpulse reads of the job's processes beyond their CPU: their private memory
(PSS) and their storage I/O. Each writes its own ground truth as one JSON line to TRUTH.
Usage: python3 memory_io_workloads.py SCENARIO SECONDS TRUTH

  worker_copy    8 persistent DataLoader workers, shuffled, over a Dataset holding 60 M Python
                 floats in a list: each worker copies the pages it reads (copy-on-access)
  worker_arrays  control: the same data in one numpy array (no reference counts written)
  ckpt_plain     bf16 steps with torch.save of 1.5 GiB every 120 steps, without --instrument
  storage        4 DataLoader workers each reading 64 random 4 KiB blocks per item with O_DIRECT
                 from a 2 GiB file: the loader waits on storage, not on the CPU
"""
import json
import mmap
import os
import random
import sys
import time

T_SCRIPT = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402

truth = {"t_script": T_SCRIPT}


def finish(**kw):
    truth.update(kw)
    with open(sys.argv[3], "a") as f:
        f.write(json.dumps({"scenario": sys.argv[1], **truth}) + "\n")


def pss_bytes(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return None


class Floats(torch.utils.data.Dataset):
    """60 M floats, 2000 to an item, as a Python list or as one numpy array."""

    PER_ITEM = 2000

    def __init__(self, as_list):
        data = np.random.rand(60_000_000)
        self.data = data.tolist() if as_list else data

    def __len__(self):
        return len(self.data) // self.PER_ITEM

    def __getitem__(self, i):
        k = i * self.PER_ITEM
        time.sleep(0.0005)
        return torch.tensor(float(sum(self.data[k:k + self.PER_ITEM])))


def workers(seconds, as_list):
    ds = Floats(as_list)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=8, persistent_workers=True)
    w = torch.zeros(1, device="cuda")
    samples, steps, t_first = [], 0, None
    end = None
    while end is None or time.time() < end:
        it = iter(loader)
        for x in it:
            w += x.cuda().sum()
            steps += 1
            if t_first is None:
                t_first = time.time()
                end = t_first + seconds
            if steps % 50 == 1:
                pids = [p.pid for p in it._workers]
                samples.append([time.time(), pss_bytes(os.getpid()), sum(pss_bytes(p) for p in pids), len(pids)])
            if time.time() > end:
                break
    torch.cuda.synchronize()
    finish(steps=steps, t_first_step=t_first, t_last_step=time.time(), pss=samples)


def ckpt_plain(seconds):
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(6)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(512, 8192, device="cuda")
    saves, steps, t_first = [], 0, None
    path = "/tmp/gpulse-ckpt-plain.pt"
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
           save_s=sum(b - a for a, b in saves), bytes_per_save=6 * 8192 * 8193 * 4)


BLOCK = 4096
FILE = "/tmp/gpulse-storage.bin"
FILE_BLOCKS = (2 << 30) // BLOCK


class Blocks(torch.utils.data.Dataset):
    """Each item: 64 random 4 KiB blocks read with O_DIRECT (no page cache)."""

    def __len__(self):
        return 10**6

    def __getitem__(self, i):
        fd = os.open(FILE, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, BLOCK)
        total = 0
        try:
            for _ in range(64):
                total += os.preadv(fd, [buf], random.randrange(FILE_BLOCKS) * BLOCK)
        finally:
            os.close(fd)
        return torch.tensor(float(total))


def storage(seconds):
    block = os.urandom(1 << 20)
    with open(FILE, "wb") as f:
        for _ in range(2 << 10):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    loader = torch.utils.data.DataLoader(Blocks(), batch_size=16, num_workers=4)
    w = torch.zeros(1, device="cuda")
    waited, steps, t_first = 0.0, 0, None
    end = None
    t0 = time.time()
    for x in loader:
        waited += time.time() - t0 if t_first else 0.0
        w += x.cuda().sum()
        torch.cuda.synchronize()
        steps += 1
        if t_first is None:
            t_first = time.time()
            end = t_first + seconds
        if time.time() > end:
            break
        t0 = time.time()
    t_last = time.time()
    os.unlink(FILE)
    finish(steps=steps, t_first_step=t_first, t_last_step=t_last, data_wait_s=waited,
           data_wait_share=waited / (t_last - t_first), bytes_read=steps * 16 * 64 * BLOCK)


if __name__ == "__main__":
    name, secs = sys.argv[1], float(sys.argv[2])
    {
        "worker_copy": lambda s: workers(s, True),
        "worker_arrays": lambda s: workers(s, False),
        "ckpt_plain": ckpt_plain,
        "storage": storage,
    }[name](secs)
