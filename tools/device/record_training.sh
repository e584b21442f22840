#!/usr/bin/env bash
# Records a real PyTorch training with DataLoader workers under `gpulse record --pid`, beside an
# idle process holding GPU memory (a forgotten notebook kernel). Usage: OUT=dir record_training.sh [gpulse]
set -u
G=${1:-carry/gpulse}; o=${OUT:-/tmp/rec}; mkdir -p "$o"
python3 -c "import torch,time; x=torch.empty(4*1024**3, dtype=torch.uint8, device='cuda'); time.sleep(120)" &
HOLDER=$!
sleep 6
python3 tools/device/train_with_workers.py 25 4 > "$o/train_events.jsonl" 2> "$o/train.err" &
TRAIN=$!
sleep 1
$G record --pid $TRAIN --interval 500ms -o "$o/training_workers.db" 2> "$o/record.err"
wait $TRAIN
kill $HOLDER
{
echo "holder pid $HOLDER, training pid $TRAIN"
cat "$o/record.err"
python3 - "$o/training_workers.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("tree processes:", c.execute("select count(distinct pid) from tree_samples").fetchone()[0])
for pid, cmd in c.execute("select p.pid, p.cmdline from processes p join (select distinct pid from tree_samples) t using (pid)"):
    print("  tree", pid, (cmd or "")[:90])
print("max tree size at one moment:", c.execute("select max(n) from (select count(*) n from tree_samples group by t_ms)").fetchone()[0])
for row in c.execute("select pid, class, max(used_mem_kib)/1024 from gpu_processes group by pid, class"):
    print("  gpu process", row)
print("gpu samples:", c.execute("select count(*), avg(util_gpu_pct) from gpu_samples").fetchone())
print("gpm sm%:", c.execute("select avg(sm_pm)/10.0 from gpm_samples").fetchone())
print("host:", c.execute("select count(*), avg(cpu_busy_pm)/10.0 from host_samples").fetchone())
print("tree cpu (cores):", c.execute("select max(s)/1000.0 from (select sum(cpu_pm) s from tree_samples group by t_ms)").fetchone())
print("events:", c.execute("select kind, payload from events").fetchall())
PY
} > "$o/record_summary.txt" 2>&1
cat "$o/record_summary.txt"
