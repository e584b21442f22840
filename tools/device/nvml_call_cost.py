"""What each per-poll read costs on the real driver, in CPU and in wall time: NVML calls through
ctypes (about 1 us of Python per call on top) and the host's /proc files read from a kept fd, each
repeated N times. One line per read: wall us and thread-CPU us a call, medians of 5 rounds.
Usage: python3 nvml_call_cost.py [N]"""
import ctypes as C
import os
import statistics
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
L = C.CDLL("libnvidia-ml.so.1")
assert L.nvmlInit_v2() == 0
dev = C.c_void_p()
assert L.nvmlDeviceGetHandleByIndex_v2(0, C.byref(dev)) == 0


class Mem1(C.Structure):
    _fields_ = [("total", C.c_ulonglong), ("free", C.c_ulonglong), ("used", C.c_ulonglong)]


class Mem2(C.Structure):
    _fields_ = [("version", C.c_uint), ("total", C.c_ulonglong), ("reserved", C.c_ulonglong),
                ("free", C.c_ulonglong), ("used", C.c_ulonglong)]


class Util(C.Structure):
    _fields_ = [("gpu", C.c_uint), ("memory", C.c_uint)]


class FieldValue(C.Structure):
    _fields_ = [("fieldId", C.c_uint), ("scopeId", C.c_uint), ("timestamp", C.c_longlong),
                ("latencyUsec", C.c_longlong), ("valueType", C.c_uint), ("nvmlReturn", C.c_uint),
                ("value", C.c_ulonglong)]


m1, m2, u, v = Mem1(), Mem2(), Util(), C.c_uint()
m2.version = C.sizeof(Mem2) | (2 << 24)
ull = C.c_ulonglong()
fv = FieldValue()
fv.fieldId = 140  # NVML_FI_DEV_MEMORY_TEMP
cnt = C.c_uint(64)


class Proc(C.Structure):
    _fields_ = [("pid", C.c_uint), ("usedGpuMemory", C.c_ulonglong), ("gpuInstanceId", C.c_uint),
                ("computeInstanceId", C.c_uint)]


procs = (Proc * 64)()


def procs_v3():
    cnt.value = 64
    return L.nvmlDeviceGetComputeRunningProcesses_v3(dev, C.byref(cnt), procs)


fds = {p: os.open(p, os.O_RDONLY) for p in ("/proc/stat", "/proc/meminfo", "/proc/loadavg")}
calls = {
    "nvmlDeviceGetMemoryInfo (v1)": lambda: L.nvmlDeviceGetMemoryInfo(dev, C.byref(m1)),
    "nvmlDeviceGetMemoryInfo_v2": lambda: L.nvmlDeviceGetMemoryInfo_v2(dev, C.byref(m2)),
    "nvmlDeviceGetUtilizationRates": lambda: L.nvmlDeviceGetUtilizationRates(dev, C.byref(u)),
    "nvmlDeviceGetTemperature": lambda: L.nvmlDeviceGetTemperature(dev, 0, C.byref(v)),
    "nvmlDeviceGetPowerUsage": lambda: L.nvmlDeviceGetPowerUsage(dev, C.byref(v)),
    "nvmlDeviceGetClockInfo(SM)": lambda: L.nvmlDeviceGetClockInfo(dev, 1, C.byref(v)),
    "nvmlDeviceGetPerformanceState": lambda: L.nvmlDeviceGetPerformanceState(dev, C.byref(v)),
    "nvmlDeviceGetCurrentClocksEventReasons": lambda: L.nvmlDeviceGetCurrentClocksEventReasons(dev, C.byref(ull)),
    "nvmlDeviceGetFanSpeed": lambda: L.nvmlDeviceGetFanSpeed(dev, C.byref(v)),
    "nvmlDeviceGetFieldValues(MEMORY_TEMP)": lambda: L.nvmlDeviceGetFieldValues(dev, 1, C.byref(fv)),
    "nvmlDeviceGetComputeRunningProcesses_v3": procs_v3,
    "nvmlDeviceGetTotalEnergyConsumption": lambda: L.nvmlDeviceGetTotalEnergyConsumption(dev, C.byref(ull)),
    "pread /proc/stat": lambda: os.pread(fds["/proc/stat"], 65536, 0),
    "pread /proc/meminfo": lambda: os.pread(fds["/proc/meminfo"], 65536, 0),
    "pread /proc/loadavg": lambda: os.pread(fds["/proc/loadavg"], 4096, 0),
    "python call (nothing)": lambda: 0,
}
print(f"{'read':44} {'wall us':>9} {'cpu us':>9}  rc   (N={N}, median of 5 rounds)")
for name, f in calls.items():
    rc = f()
    walls, cpus = [], []
    for _ in range(5):
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(N):
            f()
        w1, c1 = time.perf_counter(), time.thread_time()
        walls.append((w1 - w0) * 1e6 / N)
        cpus.append((c1 - c0) * 1e6 / N)
    rc = rc if isinstance(rc, int) else len(rc)
    print(f"{name:44} {statistics.median(walls):9.2f} {statistics.median(cpus):9.2f}  {rc}")
print("mem v1 used/total", m1.used, m1.total, "v2 used/reserved/total", m2.used, m2.reserved, m2.total)
