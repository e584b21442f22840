#!/usr/bin/env bash
# After the watch loop, the job's crate, the recording as a store and the metric table: `run`,
# `record`, `attach`, `serve` and `query` on the H200, each against ground truth taken at the
# same moment (nvidia-smi, the loop's own timing, the poll schedule). About 3 minutes.
# Usage: OUT=dir bash tools/device/verify_architecture.sh [gpulse]   (default: carry/gpulse)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_arch}; mkdir -p "$o"
echo "### run: DataLoader-bound and tuned trainings, a leak, a pty (run_training.sh, 25 s each)"
OUT=$o/runs bash tools/device/run_training.sh "$G" 25 | tail -40

echo "### record --duration 3s --interval 250ms: the schedule's 12 polls, no more"
$G record --duration 3s --interval 250ms -o "$o/timed.db" 2>&1 | tail -2
python3 - "$o/timed.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n = c.execute("select count(distinct t_ms) from gpu_samples").fetchone()[0]
h = c.execute("select count(*) from host_samples").fetchone()[0]
stop = c.execute("select payload from events where kind='stop'").fetchone()
print(f"gpu polls {n}, host polls {h}, stop {stop[0] if stop else None}", "OK" if n == 12 == h else "MISMATCH")
PY

echo "### attach: a GPU job watched until it exits"
python3 -c "
import torch, time
x = torch.randn(4096, 4096, device='cuda')
t = time.time()
while time.time() - t < 6:
    y = x @ x
    torch.cuda.synchronize()
" & JOB=$!
sleep 2
$G attach $JOB -o "$o/attach.db" --no-report 2>&1 | grep -vE '^\s*$' | head -12
wait $JOB
python3 -c "
import sqlite3; c = sqlite3.connect('$o/attach.db')
print('attach: samples', c.execute('select count(distinct t_ms) from gpu_samples').fetchone()[0],
      'job processes on the GPU', c.execute(\"select count(*) from gpu_processes where pid=$JOB\").fetchone()[0] if c.execute(\"select name from sqlite_master where name='gpu_processes'\").fetchone() else 'n/a',
      'stop', c.execute(\"select payload from events where kind='stop'\").fetchone())
"

echo "### the metric table: query and /metrics against nvidia-smi at the same moment"
nvidia-smi -q -d PCIE | grep -E 'Replays Since Reset|Replay Number Rollovers' | head -2
nvidia-smi nvlink -s 2>&1 | head -4
nvidia-smi nvlink -e 2>&1 | head -8
$G query --query-gpu=index,pcie.replay_counter,nvlink.errors.crc_flit.total,utilization.gpu,memory.used,power.draw --format=csv
nvidia-smi --query-gpu=index,utilization.gpu,memory.used,power.draw --format=csv
python3 -c "
import ctypes
n = ctypes.CDLL('libnvidia-ml.so.1'); n.nvmlInit_v2()
h = ctypes.c_void_p(); n.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
class V(ctypes.Union): _fields_ = [('d', ctypes.c_double), ('ui', ctypes.c_uint), ('ul', ctypes.c_ulong), ('ull', ctypes.c_ulonglong), ('sll', ctypes.c_longlong), ('si', ctypes.c_int), ('us', ctypes.c_ushort)]
class F(ctypes.Structure): _fields_ = [('fieldId', ctypes.c_uint), ('scopeId', ctypes.c_uint), ('timestamp', ctypes.c_longlong), ('latencyUsec', ctypes.c_longlong), ('valueType', ctypes.c_uint), ('nvmlReturn', ctypes.c_uint), ('value', V)]
a = (F * 2)(); a[0].fieldId = 94; a[1].fieldId = 38
print('NVML field values (id, return, value):', n.nvmlDeviceGetFieldValues(h, 2, a), [(f.fieldId, f.nvmlReturn, f.value.ull) for f in a])
"
$G record --duration 2s -o "$o/table.db" >/dev/null 2>&1
python3 -c "import sqlite3; print('recorded gpu_fields:', sqlite3.connect('$o/table.db').execute('select gpu, key, value, absent from gpu_fields').fetchall())"
$G serve --listen 127.0.0.1:9455 --no-auth >/dev/null 2>&1 &
S=$!
sleep 4
curl -s 127.0.0.1:9455/metrics | grep -E '^DCGM_FI_DEV_(PCIE_REPLAY|NVLINK_CRC)|^DCGM_FI_DEV_GPU_UTIL|^DCGM_FI_DEV_FB_USED'
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
kill -INT $S; wait $S
echo "serve exit $?"
