#!/usr/bin/env bash
# Checks on a GPU machine what issue 10 changed where the real driver is involved, beside
# nvidia-smi at the same moment. Usage: OUT=dir tools/device/verify_safety.sh [gpulse-binary]
# Writes safety.txt under $OUT.
set -u
G=$(realpath "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify-safety}; mkdir -p "$o"
w=$(mktemp -d); cd "$w" || exit 1
{
echo "### -l 0 and -lms 0: nvidia-smi, then gpulse (stdout, then rc)"
for a in "-l 0" "-lms 0"; do
  nvidia-smi --query-gpu=timestamp --format=csv $a > smi.txt 2>smi.err; r1=$?
  $G --query-gpu=timestamp --format=csv $a > g.txt 2>g.err; r2=$?
  echo "$a: nvidia-smi rc=$r1 gpulse rc=$r2; stdout identical: $(cmp -s smi.txt g.txt && echo yes || echo NO); stderr bytes $(wc -c <smi.err)/$(wc -c <g.err)"
done
echo "### record --interval 10s --duration 1s, with nvidia-smi's memory.used at the same moment"
s=$(date +%s%N); nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
$G record --interval 10s --duration 1s -o d.db; echo "rc=$? wall $(( ($(date +%s%N) - s) / 1000000 )) ms"
$G export d.db --query-gpu=memory.used,memory.total --format=csv,noheader
echo "### SIGHUP to record on the real driver: clean stop, no side files"
$G record --interval 200ms -o hup.db 2>hup.err & p=$!; sleep 3; kill -HUP $p; wait $p; echo "rc=$?"; cat hup.err
ls hup.db* ; python3 -c "import sqlite3; c=sqlite3.connect('hup.db'); print(c.execute('select kind, payload from events').fetchall(), c.execute('select count(*) from gpu_samples').fetchone())"
echo "### outputs: export to /dev/stdout after a >> log, a recording as -o, the input as -o"
echo kept > app.log; $G export d.db -o /dev/stdout >> app.log; head -2 app.log; ls -la /dev/stdout
$G report d.db -o d.db; echo "rc=$?"; $G export d.db -o hup.db; echo "rc=$?"; python3 -c "import sqlite3; print(sqlite3.connect('d.db').execute('select value from meta where key=\"schema_version\"').fetchone())"
echo "### a python -c job with newlines, as gpulse status and nvidia-smi list it"
python3 -c 'import torch, time
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
time.sleep(12)' & j=$!; sleep 6
$G status | tail -4
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
echo "### gpulse run with its own name claimed while another run holds the same second"
(cd "$w" && $G run --status off --no-report -- python3 -c 'import time; time.sleep(1)' 2>&1 | tail -2) &
(cd "$w" && $G run --status off --no-report -- python3 -c 'import time; time.sleep(1)' 2>&1 | tail -2); wait %2 2>/dev/null
ls gpulse-runs; wait $j
echo "### a job that kills itself with SIGKILL, and one that asks CUDA for 200 GiB"
$G run --status off --no-report -o killed.db -- python3 -c 'import torch, os, time; x = torch.ones(1, device="cuda"); time.sleep(2); os.kill(os.getpid(), 9)'; echo "rc=$?"
cat /proc/self/cgroup; ls /sys/fs/cgroup/memory.events 2>/dev/null
$G run --status off --no-report -o oom.db -- python3 -c 'import torch; torch.empty(200 << 30, dtype=torch.uint8, device="cuda")' 2>&1 | grep -v "^  File\|^    " | tail -12; echo "rc=${PIPESTATUS[0]}"
$G diagnose oom.db --format json | python3 -c "import json,sys; d=json.load(sys.stdin); print([(f['id'], f['severity'], f['evidence'].get('tried_gib'), f['evidence'].get('peak_gib')) for f in d['findings']])"
echo "### --nvml-lib naming the path and the loader's reason; the driver's own library"
$G --nvml-lib /nonexistent/libnvidia-ml.so status; echo "rc=$?"
$G --nvml-lib "$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')" --query-gpu=name --format=csv,noheader; echo "rc=$?"
} > "$o/safety.txt" 2>&1
cat "$o/safety.txt"
