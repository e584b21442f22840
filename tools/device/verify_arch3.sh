#!/usr/bin/env bash
# Architecture step 3 on a real H200, beside nvidia-smi at the same moments: the views that now
# run through the one loop (`query -l`, `watch`, `top`), the metric table's printing (query,
# status, /metrics), and a sleeping main thread on a loaded host (woken, waiting for a core).
# Usage: OUT=dir bash tools/device/verify_arch3.sh carry/gpulse
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_arch3}; mkdir -p "$o"
export PYTHONPATH=$PWD/python
F=timestamp,name,utilization.gpu,memory.used,memory.total,temperature.gpu,temperature.memory,power.draw,power.draw.average,power.limit,enforced.power.limit,clocks.sm,clocks.mem,clocks.max.sm,pstate,fan.speed,pcie.link.gen.current,pcie.link.width.current,clocks_event_reasons.active
{
  echo "== one shot, nvidia-smi then gpulse, csv"
  nvidia-smi --query-gpu=$F --format=csv; "$G" query --query-gpu=$F --format=csv
  echo "== noheader,nounits"
  nvidia-smi --query-gpu=$F --format=csv,noheader,nounits; "$G" query --query-gpu=$F --format=csv,noheader,nounits
} >"$o/query_oneshot.txt" 2>&1
# -lms through the one loop: the same fields every 200 ms for 3 s, each beside the other.
timeout -s INT 3 nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,temperature.gpu --format=csv -lms 200 >"$o/smi_lms.csv" 2>&1 &
timeout -s INT 3 "$G" query --query-gpu=timestamp,power.draw,clocks.sm,temperature.gpu --format=csv -lms 200 >"$o/gpulse_lms.csv" 2>&1 &
wait
# nvidia-smi takes `-l -1` as a loop without end, so each try is cut after 3 s (exit 124).
for x in 0 -1; do timeout 3 nvidia-smi --query-gpu=name --format=csv -l $x >"$o/smi_l$x.txt" 2>&1; echo "smi -l $x exit $?"; timeout 3 "$G" query --query-gpu=name --format=csv -l $x >/dev/null 2>&1; echo "gpulse -l $x exit $?"; done >"$o/loop_values.txt"
/usr/bin/time -f "watch -i 500ms -n 4: %e s" "$G" watch -i 500ms -n 4 >"$o/watch.txt" 2>"$o/watch.time"
"$G" watch -n 0 >>"$o/watch.txt" 2>&1; echo "watch -n 0 exit $?" >>"$o/watch.txt"
nvidia-smi >"$o/smi_status.txt" 2>&1; "$G" status >"$o/gpulse_status.txt" 2>&1
# top in a real pseudo-terminal of 160×45, stopped by SIGINT after 4 s; --foreground, or top,
# reading its terminal from a background group, is stopped by SIGTTIN.
timeout 20 script -qfc "stty cols 160 rows 45; timeout --foreground -s INT 4 $G top" "$o/top.raw" </dev/null >/dev/null 2>&1; echo "top exit $?" >"$o/top.exit"
# /metrics under dcgm-exporter's names, beside nvidia-smi.
"$G" serve --listen 127.0.0.1:9477 >"$o/serve.out" 2>&1 & S=$!
sleep 3
python3 - >"$o/metrics.txt" 2>&1 <<'PY'
import urllib.request
t = urllib.request.urlopen("http://127.0.0.1:9477/metrics", timeout=5).read().decode()
for l in t.splitlines():
    if l.startswith(("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_TOTAL_ENERGY")):
        print(l.split("{")[0], l.rsplit(" ", 1)[-1])
PY
nvidia-smi --query-gpu=power.draw,temperature.gpu,clocks.sm,clocks.mem,memory.used,memory.free,utilization.gpu,power.limit --format=csv >>"$o/metrics.txt" 2>&1
kill -INT $S; wait $S 2>/dev/null
# A sleeping main thread on a host whose every core is busy: woken, it waits for a core.
OUT="$o" bash tools/device/verify_saturated.sh "$G" 12 sleep >"$o/sleep_summary.txt" 2>&1
