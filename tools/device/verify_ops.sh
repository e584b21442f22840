#!/usr/bin/env bash
# `gpulse record` and `gpulse serve` on a real GPU beside nvidia-smi at the same moments, while a
# CUDA loop runs: the recording's utilization and memory against nvidia-smi's log, and serve's
# /metrics against nvidia-smi read at the moment of the scrape.
# Usage: OUT=dir bash tools/device/verify_ops.sh [gpulse] ; writes ops.txt and the recordings.
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_ops}; mkdir -p "$o"
export PYTHONPATH=$PWD/python GPULSE_TOKEN=ops-check-token-0123456789
{
python3 tools/device/main_thread_workloads.py gpu_bound 45 >"$o/load.out" 2>&1 &
load=$!
sleep 8
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 >"$o/record.smi" &
smi=$!
"$G" record -o "$o/record.db" --duration 12s --interval 500ms 2>&1
kill $smi; wait $smi 2>/dev/null
"$G" export "$o/record.db" --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits >"$o/record.csv" 2>&1
python3 - "$o/record.csv" "$o/record.smi" <<'PY'
import sys
def read(p):
    rows = [l.split(", ") for l in open(p) if l.count(",") >= 2]
    return [(float(r[1]), float(r[2])) for r in rows if r[1].strip().replace('.', '').isdigit()]
g, s = read(sys.argv[1]), read(sys.argv[2])
mean = lambda xs: sum(xs) / max(len(xs), 1)
print(f"record: {len(g)} samples, util mean {mean([x[0] for x in g]):.1f}%, memory mean {mean([x[1] for x in g]):.0f} MiB")
print(f"nvidia-smi: {len(s)} reads, util mean {mean([x[0] for x in s]):.1f}%, memory mean {mean([x[1] for x in s]):.0f} MiB")
PY
"$G" serve --listen 127.0.0.1:9400 --duration 14s --record "$o/serve.db" 2>"$o/serve.err" &
srv=$!
sleep 6
for i in 1 2 3; do
  echo "### scrape $i"
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits
  curl -s -H "Authorization: Bearer $GPULSE_TOKEN" localhost:9400/metrics | grep -E '^DCGM_FI_DEV_(GPU_UTIL|FB_USED)|^DCGM_FI_PROF_SM_ACTIVE|^gpulse_main_thread' | head -8
  sleep 2
done
wait $srv; echo "serve exit $?"
cat "$o/serve.err"
"$G" diagnose "$o/serve.db" | head -12
kill $load 2>/dev/null; wait $load 2>/dev/null
} > "$o/ops.txt" 2>&1
cat "$o/ops.txt"
