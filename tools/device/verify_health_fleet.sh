#!/usr/bin/env bash
# GPU health, a job's pod, and the recorder's cost on the H200, each beside the driver's own
# tools at the same moment: NVLink state and errors, retired pages and row remapping, the Xid
# thread (and a real Xid from a kernel that faults, against `dmesg`), a GPU job moved into a
# cgroup shaped as Kubernetes' systemd driver makes it (its pod UID on the /metrics series), and
# measure_cost.sh for the added GPM metrics. About 4 minutes.
# Usage: OUT=dir bash tools/device/verify_health_fleet.sh [gpulse]   (default: carry/gpulse)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/health}; mkdir -p "$o"; w=$(mktemp -d)
echo "### NVLink, retired pages, row remapping: nvidia-smi, then gpulse"
nvidia-smi nvlink -s 2>&1 | head -5; nvidia-smi nvlink -e 2>&1 | head -6
nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER 2>&1 | sed -n '/Attached/,$p' | grep -v '^$' | head -20
$G status 2>&1 | grep -iE "nvlink|health|remap|retired" | head
$G status --json | python3 -c "import json,sys; g=json.load(sys.stdin)['gpus'][0]; print({k: g.get(k) for k in ('nvlinks','absent') if k in g})"
$G query --query-gpu=index,nvlink.errors.crc_flit.total,nvlink.errors.crc_data.total,nvlink.errors.replay.total,nvlink.errors.recovery.total,nvlink.speed.common,retired_pages.sbe.field,retired_pages.dbe.field,retired_pages.pending.field,remapped_rows.pending.field,remapped_rows.pending,remapped_rows.correctable,remapped_rows.uncorrectable --format=csv 2>&1

echo "### serve: Xid, NVLink and retired-page series; the Xid thread's CPU over 20 s"
$G serve --listen 127.0.0.1:9466 --no-auth > "$w/serve.log" 2>&1 &
S=$!; sleep 3
curl -s 127.0.0.1:9466/metrics | grep -E '^DCGM_FI_DEV_(XID|NVLINK|RETIRED|ROW_REMAP|CORRECTABLE_REMAPPED|UNCORRECTABLE_REMAPPED)' | sed -E 's/\{[^}]*\}/{…}/' 
command -v promtool >/dev/null && curl -s 127.0.0.1:9466/metrics | promtool check metrics 2>&1 | head -5
t0=$(for t in /proc/$S/task/*; do [ "$(cat $t/comm)" = gpulse-xid ] && awk '{print $14+$15}' $t/stat; done)
p0=$(awk '{print $14+$15}' /proc/$S/stat)
sleep 20
t1=$(for t in /proc/$S/task/*; do [ "$(cat $t/comm)" = gpulse-xid ] && awk '{print $14+$15}' $t/stat; done)
p1=$(awk '{print $14+$15}' /proc/$S/stat)
echo "gpulse-xid thread: ${t0:-none} -> ${t1:-none} ticks over 20 s; whole serve: $p0 -> $p1 ticks"

echo "### a real Xid: a kernel that writes through a null pointer, under gpulse run"
cat > "$w/fault.cu" <<'CU'
#include <cstdio>
__global__ void bad(int *p) { p[threadIdx.x] = 1; }
int main() { bad<<<1, 32>>>(nullptr); cudaError_t e = cudaDeviceSynchronize(); printf("%s\n", cudaGetErrorString(e)); return e != cudaSuccess; }
CU
nvcc -o "$w/fault" "$w/fault.cu" 2>&1 | tail -2
dmesg 2>/dev/null | grep -c Xid > "$w/xid_before"
$G run --status off --no-report -o "$o/xid.db" -- "$w/fault" 2>&1 | tail -4
sleep 2
echo "dmesg Xid lines before: $(cat $w/xid_before), after: $(dmesg 2>/dev/null | grep -c Xid)"; dmesg 2>/dev/null | grep Xid | tail -2
curl -s 127.0.0.1:9466/metrics | grep -E '^DCGM_FI_DEV_XID_ERRORS' | sed -E 's/\{[^}]*\}/{…}/'
python3 -c "
import sqlite3; c = sqlite3.connect('$o/xid.db')
print('xid events in the recording:', c.execute(\"select t_ms, payload from events where kind='xid'\").fetchall())"
$G diagnose "$o/xid.db" 2>&1 | head -8

echo "### a job in a cgroup shaped as kubelet's systemd driver makes it"
. tools/device/pod_job.sh; start_pod_job 12
echo "cgroup: $D"; tail -1 /proc/$J/cgroup
sleep 6
curl -s 127.0.0.1:9466/metrics | grep -E "^gpulse_process_(sm_ratio|gpu_memory_bytes)" | grep -E "pid=\"$J\"|pod" | head -4
$G query --query-compute-apps=pid,used_memory --format=csv; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
wait $J; rmdir "$D" 2>/dev/null
kill -INT $S; wait $S; echo "serve exit $?"

echo "### the recorder's cost with the added GPM metrics (measure_cost.sh, 40 s)"
OUT=$w/cost bash tools/device/measure_cost.sh "$G" 40 > /dev/null 2>&1
grep -E "record|query|nvidia-smi" "$w/cost/measure_cost.txt" | head -12
grep -iE "gpm|total" "$w/cost/profile_record_1s.txt" | head -6
cp "$w/cost/measure_cost.txt" "$o/measure_cost.txt"
rm -rf "$w"
