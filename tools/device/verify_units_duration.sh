#!/usr/bin/env bash
# Rates in one unit, a duration's last sample, and attribution's cost, on the real driver:
# - PCIe throughput under a pinned host-to-device copy loop: `gpulse status` and `top` (MiB/s)
#   beside `nvidia-smi dmon -s t` (MB/s) at the same moment;
# - `record --duration 3s --interval 1s`: its samples (0 to 3 s) and the energy counter's reads;
# - `run` of a 20 s job with GPULSE_PROFILE=1: the per-poll cost of attribution
#   ("workloads (/proc/PID/cgroup)") beside the whole poll.
# About 90 s. Usage: OUT=dir bash tools/device/verify_units_duration.sh [gpulse]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_units}; mkdir -p "$o"
python3 - > "$o/copy.log" 2>&1 <<'PY' &
import time, torch
h = torch.empty(1 << 28, dtype=torch.uint8).pin_memory()
d = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
end = time.time() + 40
while time.time() < end:
    d.copy_(h, non_blocking=True); torch.cuda.synchronize()
    h.copy_(d, non_blocking=True); torch.cuda.synchronize()
PY
L=$!
sleep 8
echo "== PCIe: nvidia-smi dmon (MB/s) beside gpulse status (MiB/s), three moments"
for i in 1 2 3; do
  nvidia-smi dmon -c 1 -s t > "$o/dmon_$i.txt" 2>&1 & p=$!
  "$G" status 2>&1 | grep -E "PCIe" > "$o/status_$i.txt"; wait $p
  tail -1 "$o/dmon_$i.txt"; cat "$o/status_$i.txt"
done
if command -v tmux >/dev/null; then
  T="tmux -L gpulse-units"; $T kill-server 2>/dev/null
  $T new-session -d -s gtop -x 200 -y 50 "$G top --interval 1s"; sleep 6
  $T capture-pane -p -t gtop: | grep -E "PCIe|NVLink" | head -3
  nvidia-smi dmon -c 1 -s t | tail -1
  $T kill-server
fi
wait $L
echo "== record --duration 3s --interval 1s"
rm -f "$o/dur.db"
"$G" record --duration 3s --interval 1s -o "$o/dur.db" 2> "$o/dur.err"; echo "exit $?"
python3 - "$o/dur.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
t = [r[0] for r in c.execute("select t_ms from gpu_samples where gpu = 0 order by t_ms")]
print("samples at (s):", [round((x - t[0]) / 1000, 2) for x in t])
e = c.execute("select t_ms, energy_mj from gpu_state order by t_ms").fetchall()
print("energy reads (s, mJ):", [(round((a - e[0][0]) / 1000, 2), b) for a, b in e])
PY
echo "== run, profiled: attribution per poll"
GPULSE_PROFILE=1 "$G" run --status off --no-report -o "$o/prof.db" -- python3 -c "
import time, torch
a = torch.randn(4096, 4096, device='cuda')
end = time.time() + 20
while time.time() < end:
    a @ a; torch.cuda.synchronize(); time.sleep(0.01)
" > "$o/prof.out" 2> "$o/prof.err"
grep -E "workloads|total poll|calls" "$o/prof.err" | head -6
rm -f "$o"/*.db "$o"/*.db-*
