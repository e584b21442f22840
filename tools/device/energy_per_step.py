"""Ground truth for gpulse's energy per step: a BF16 matmul loop marked with gpulse.step(), after
an idle start-up and before an idle tail, that reads NVML's energy counter itself (through ctypes,
as gpulse does) right after its first and its last step mark.

Usage: python3 energy_per_step.py IDLE_S LOOP_S TRUTH.json
Writes {"steps", "joules", "joules_per_step", "step_s"} over the steps after the first mark, the
span gpulse measures.
"""

import ctypes
import json
import sys
import time

import gpulse
import torch


def energy_counter():
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    assert nvml.nvmlInit_v2() == 0
    dev = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0

    def read_mj():
        mj = ctypes.c_ulonglong()
        assert nvml.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(mj)) == 0
        return mj.value

    return read_mj


def main(idle_s, loop_s, truth):
    read_mj = energy_counter()
    time.sleep(idle_s)  # start-up at idle power
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    gpulse.mark("batch", samples_per_step=256)
    first = None
    steps = 0
    end = time.monotonic() + loop_s
    while time.monotonic() < end:
        for _ in range(20):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        gpulse.step()
        now = time.monotonic()
        if first is None:
            first = (now, read_mj())
        else:
            steps += 1
    last = (time.monotonic(), read_mj())
    time.sleep(2.0)  # the tail: saving, shutdown
    joules = (last[1] - first[1]) / 1000.0
    out = {"steps": steps, "joules": joules, "joules_per_step": joules / steps,
           "step_s": (last[0] - first[0]) / steps}
    json.dump(out, open(truth, "w"))
    print("truth:", json.dumps(out))


if __name__ == "__main__":
    main(float(sys.argv[1]), float(sys.argv[2]), sys.argv[3])
