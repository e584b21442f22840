"""Real CUDA loops whose GPU idles for one host-side mechanism each, with the loop's own timing.

Each step launches about 10 ms of BF16 matmuls, synchronizes (the GPU is then idle), and does
one thing on the host that the loop times itself: the ground truth for gpulse's account of that
mechanism. The loop marks its steps (gpulse.step()) and writes {"mech", "loop_s", "mech_s",
"steps"} to $TRUTH at the end.

Usage: python3 main_thread_workloads.py MECH SECONDS
MECH: python numpy sync sleep network disk ipc gil lock optimizer recompile gpu_bound deep
      fsync native withlock pool loader0 sleepkernel launchbound
sleepkernel: one thread of one block spins 10 ms on the GPU and the host waits for it (GPU-Util
  reads it busy, SM activity about 1/132): the wait is the GPU's work, not the host's.
launchbound: 300 tiny elementwise ops, no sync: the host launching them is the step's time and
  the GPU idles between their few microseconds each.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import torch

import gpulse

mech, seconds = sys.argv[1], float(sys.argv[2])
if mech == "pool":
    import multiprocessing

    # Forked before CUDA and gpulse's threads start: a fork after them can deadlock the workers
    # (a run of this workload forked later hung). Each worker's task is a builtin's, picklable.
    POOL = multiprocessing.get_context("fork").Pool(2)
dev = "cuda"
a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)


def gpu_work(n=6):
    for _ in range(n):
        a @ a


def busy_python(ms):
    """Pure Python for about `ms` milliseconds."""
    end = time.perf_counter() + ms / 1000
    x = 0
    while time.perf_counter() < end:
        for i in range(200):
            x += i * i
    return x


setup = {}
if mech == "numpy":
    import numpy as np

    setup["preds"] = np.random.rand(2_000_000)
elif mech == "network":
    # A local server that answers each request after 20 ms.
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket,time\n"
            "s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
            "s.bind(('127.0.0.1',0));s.listen(1);print(s.getsockname()[1],flush=True)\n"
            "c,_=s.accept()\n"
            "while c.recv(16):\n time.sleep(0.02);c.sendall(b'x'*4096)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(server.stdout.readline())
    sock = socket.create_connection(("127.0.0.1", port))
    setup["sock"] = sock
elif mech == "disk":
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpulse_disk_workload.bin")
    with open(path, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    setup["path"] = path
elif mech == "ipc":
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 1_000_000

        def __getitem__(self, i):
            time.sleep(0.025)
            return torch.ones(16)

    setup["it"] = iter(DataLoader(Slow(), batch_size=1, num_workers=1))
elif mech == "gil":
    # A thread of pure Python that never lets the GIL go for long.
    def spin():
        while True:
            busy_python(50)

    threading.Thread(target=spin, daemon=True).start()
elif mech == "lock":
    import queue

    q = queue.Queue()

    def producer():
        while True:
            time.sleep(0.02)
            q.put(1)

    threading.Thread(target=producer, daemon=True).start()
    setup["q"] = q
elif mech == "optimizer":
    params = [torch.nn.Parameter(torch.randn(64, device=dev)) for _ in range(600)]
    for p in params:
        p.grad = torch.randn_like(p)
    setup["opt"] = torch.optim.Adam(params, foreach=False)
elif mech == "recompile":
    import torch._dynamo

    torch._dynamo.config.automatic_dynamic_shapes = False
    torch._dynamo.config.cache_size_limit = 1000

    @torch.compile(dynamic=False)
    def f(x):
        return (x * 2 + 1).relu().sum()

    setup["f"] = f
elif mech == "fsync":
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpulse_fsync_workload.bin")
    setup["path"] = path
    setup["f"] = open(path, "wb")
elif mech == "native":
    import torch.nn.functional as F

    setup["img"] = torch.rand(8, 3, 256, 256)
    setup["F"] = F
elif mech == "withlock":
    # Another thread holds the lock 30 ms at a time.
    lock = threading.Lock()

    def holder():
        while True:
            with lock:
                time.sleep(0.03)
            time.sleep(0.001)

    threading.Thread(target=holder, daemon=True).start()
    setup["lock"] = lock
elif mech == "pool":
    setup["pool"] = POOL
elif mech == "loader0":
    from torch.utils.data import DataLoader, Dataset

    class SlowLocal(Dataset):
        def __len__(self):
            return 1_000_000

        def __getitem__(self, i):
            time.sleep(0.025)
            return torch.ones(16)

    setup["it"] = iter(DataLoader(SlowLocal(), batch_size=1, num_workers=0, pin_memory=True))
elif mech == "launchbound":
    setup["small"] = torch.zeros(256, device=dev)
elif mech == "deep":
    # Eight idle threads beside the main one, as a training process has.
    for _ in range(8):
        threading.Thread(target=threading.Event().wait, daemon=True).start()


def one_host_step(i):
    """The mechanism, timed: returns its seconds."""
    t0 = time.perf_counter()
    if mech in ("python", "deep"):
        busy_python(20)
    elif mech == "numpy":
        p = setup["preds"]
        (p > 0.5).mean()
        p.argsort()
    elif mech == "sync":
        t = torch.zeros(1, device=dev)
        for _ in range(20):
            t = (t + a[0, :1].float()).sin()
            t.item()
    elif mech == "sleepkernel":
        torch.cuda._sleep(20_000_000)
        torch.cuda.synchronize()
    elif mech == "launchbound":
        t = setup["small"]
        for _ in range(300):
            t = t + 1
        setup["last"] = t
    elif mech == "sleep":
        time.sleep(0.02)
    elif mech == "network":
        setup["sock"].sendall(b"next")
        got = 0
        while got < 4096:
            got += len(setup["sock"].recv(65536))
    elif mech == "disk":
        fd = os.open(setup["path"], os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, 1 << 20):
            pass
        os.close(fd)
    elif mech == "ipc":
        next(setup["it"])
    elif mech == "gil":
        busy_python(5)
    elif mech == "lock":
        setup["q"].get()
    elif mech == "fsync":
        f = setup["f"]
        f.write(b"x" * 65536)
        f.flush()
        os.fsync(f.fileno())
    elif mech == "native":
        setup["F"].interpolate(setup["img"], scale_factor=2, mode="bilinear")
    elif mech == "withlock":
        with setup["lock"]:
            busy_python(1)
    elif mech == "pool":
        setup["pool"].map(sum, [range(300_000)] * 8)
    elif mech == "loader0":
        next(setup["it"])
    elif mech == "optimizer":
        setup["opt"].step()
    elif mech == "recompile":
        setup["f"](torch.randn(8 + i, device=dev))
    return time.perf_counter() - t0


def deep_loop(depth, fn):
    """Runs the loop `depth` frames down, as a framework's trainer does."""
    if depth == 0:
        return fn()
    return deep_loop(depth - 1, fn)


def profiled():
    """With PROFILE_STEPS=N, N more steps after the loop under CUPTI (the profiler's start takes
    seconds, so never inside the timed loop): the kernels' and the copies' GPU seconds against
    those steps' wall time, the GPU's true busy share, which NVML's GPU-Util and SM activity
    only estimate."""
    n = int(os.environ.get("PROFILE_STEPS", "0"))
    if not n:
        return {}
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for i in range(n):
            gpu_work(24 if mech == "gpu_bound" else 6)
            if mech != "gpu_bound":
                torch.cuda.synchronize()
                one_host_step(i)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t
    kern = copy = 0.0
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            us = getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)
            if "memcpy" in e.name.lower() or "memset" in e.name.lower():
                copy += us / 1e6
            else:
                kern += us / 1e6
    return {"steps": n, "wall_s": wall, "kernel_s": kern, "copy_s": copy}


def loop():
    mech_s = 0.0
    steps = 0
    torch.cuda.synchronize()
    gpulse.step()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        gpu_work(24 if mech == "gpu_bound" else 6)
        if mech != "gpu_bound":
            torch.cuda.synchronize()
            mech_s += one_host_step(steps)
        steps += 1
        gpulse.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, mech_s, steps


gpu_work()
torch.cuda.synchronize()
loop_s, mech_s, steps = deep_loop(45 if mech == "deep" else 0, loop)
PROFILE = profiled()
out = {"mech": mech, "loop_s": loop_s, "mech_s": mech_s, "steps": steps, "pid": os.getpid(), "profile": PROFILE}
print(json.dumps(out), flush=True)
if os.environ.get("TRUTH"):
    with open(os.environ["TRUTH"], "w") as f:
        json.dump(out, f)
if mech in ("disk", "fsync"):
    os.unlink(setup["path"])
os._exit(0)
