#!/usr/bin/env bash
# A job's pod on the H200: a training moved into a cgroup shaped as kubelet's systemd driver
# makes it, under `gpulse record` (the recording's workloads table), `serve` (/metrics labels)
# and `top` (the POD/JOB column), beside nvidia-smi's process list; then a timed record's polls.
# Usage: OUT=dir bash tools/device/verify_workloads.sh [gpulse]   (default: carry/gpulse)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/workloads}; mkdir -p "$o"
. tools/device/pod_job.sh; start_pod_job 25
$G record --duration 20s --interval 500ms -o "$o/pod.db" > /dev/null 2>&1 &
R1=$!
$G serve --listen 127.0.0.1:9468 --no-auth > /dev/null 2>&1 & S=$!
T="tmux -L gw"; $T new-session -d -s gw -x 200 -y 50 "$G top"
sleep 14
echo "### nvidia-smi's processes, then gpulse's series for the job (PID $J)"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
curl -s 127.0.0.1:9468/metrics | grep -E "^gpulse_process_(sm_ratio|gpu_memory_bytes)" | grep "pid=\"$J\""
echo "### top's screen"
$T capture-pane -p -t gw: | grep -E "POD|JOB|$J" | head -5
$T send-keys -t gw: g; sleep 2; $T capture-pane -p -t gw: | grep -E "$J" | head -3
$T send-keys -t gw: q; sleep 1; $T kill-server 2>/dev/null
wait $R1
python3 -c "
import sqlite3; c = sqlite3.connect('$o/pod.db')
print('workloads:', c.execute('select pid, kind, uid, container_id from workloads').fetchall())
print('polls:', c.execute('select count(distinct t_ms) from gpu_samples').fetchone()[0], '(40 due in 20 s at 500 ms)')"
kill -INT $S; wait $S; wait $J; rmdir "$D" 2>/dev/null; echo done
