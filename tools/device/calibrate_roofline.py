"""Ground truth for gpulse's roofline estimate: GEMMs of known FLOPs and copies of known bytes.

Usage: python3 calibrate_roofline.py KIND SECONDS TRUTH.jsonl
KIND: bf16, fp16, tf32, fp32, fp64 (a square matmul, 2*n^3 FLOP each) or copy (a device-to-device
copy: each reads and writes its bytes once, so 2*bytes of DRAM traffic). Runs the work for about a
second untimed (cuBLAS picks its kernel, clocks settle), then SECONDS timed with CUDA events, and
appends {"kind", "seconds", "rate_per_s", "unit"} to TRUTH.jsonl.

    python3 calibrate_roofline.py --table TRUTH.jsonl ERR_DIR   # the table, from each run's summary
"""

import json
import re
import sys


def work(kind, seconds, truth):
    import torch

    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    if kind == "copy":
        n = 4 << 30  # 4 GiB each way: far past every cache
        src = torch.empty(n, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        step = lambda: dst.copy_(src)  # noqa: E731
        per_step, unit = 2 * n, "B/s"
    else:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32,
                 "fp32": torch.float32, "fp64": torch.float64}[kind]
        n = 8192
        a = torch.randn(n, n, device=dev).to(dtype)
        b = torch.randn(n, n, device=dev).to(dtype)
        c = torch.empty(n, n, device=dev, dtype=dtype)
        step = lambda: torch.matmul(a, b, out=c)  # noqa: E731
        per_step, unit = 2 * n**3, "FLOP/s"
    import time

    t_end = time.monotonic() + 1.0
    while time.monotonic() < t_end:  # warm-up, untimed
        step()
        torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    steps, elapsed_ms = 0, 0.0
    while elapsed_ms < seconds * 1000:
        start.record()
        for _ in range(10):
            step()
        stop.record()
        stop.synchronize()
        elapsed_ms += start.elapsed_time(stop)
        steps += 10
    rate = per_step * steps / (elapsed_ms / 1000)
    with open(truth, "a") as f:
        f.write(json.dumps({"kind": kind, "seconds": elapsed_ms / 1000, "steps": steps,
                            "rate_per_s": rate, "unit": unit}) + "\n")


# What gpulse's roofline line says for each kind: (label in the line, unit scale).
ESTIMATE = {
    "bf16": (r"BF16/FP16 tensor ([\d.]+) of", 1e12),
    "fp16": (r"BF16/FP16 tensor ([\d.]+) of", 1e12),
    "tf32": (r"TF32 tensor ([\d.]+) of", 1e12),
    "fp32": (r"(?<!T)FP32 ([\d.]+) of", 1e12),
    "fp64": (r"FP64(?: tensor)? ([\d.]+) of", 1e12),
    "copy": (r"([\d.]+) of [\d.]+ TB/s", 1e12),
}


def table(truth, err_dir):
    rows = ["| kind | computed | gpulse's estimate | estimate / computed | within ±20 % | gpulse's line |",
            "|---|---|---|---|---|---|"]
    for line in open(truth):
        t = json.loads(line)
        kind = t["kind"]
        try:
            summary = open(f"{err_dir}/{kind}.err", errors="replace").read()
        except OSError:
            summary = ""
        roof = next((l.strip() for l in summary.splitlines() if l.strip().startswith("GPU 0 ")), "")
        pattern, scale = ESTIMATE[kind]
        m = re.search(pattern, roof)
        unit = "TB/s" if kind == "copy" else "TFLOP/s"
        computed = t["rate_per_s"] / scale
        if m:
            est = float(m.group(1))
            ratio = est / computed
            rows.append(f"| {kind} | {computed:.1f} {unit} | {est:.1f} {unit} | {ratio:.2f} | "
                        f"{'yes' if abs(ratio - 1) <= 0.2 else 'NO'} | {roof} |")
        else:
            rows.append(f"| {kind} | {computed:.1f} {unit} | — | — | NO | {roof or 'no roofline line'} |")
    print("\n".join(rows))


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        table(sys.argv[2], sys.argv[3])
    else:
        work(sys.argv[1], float(sys.argv[2]), sys.argv[3])
