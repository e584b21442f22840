#!/usr/bin/env bash
# `gpulse attach` on a GPU job started elsewhere, and `gpulse run` on a pseudo-terminal (the status
# row). Usage: OUT=dir attach_tty.sh [gpulse]
set -u
G=${1:-carry/gpulse}; o=${OUT:-/tmp/attach}; mkdir -p "$o"
python3 tools/device/load.py 10 6 > "$o/attach_load.jsonl" &
P=$!
sleep 5
$G attach $P -o "$o/attach.db" --status line --status-every 3s --no-report 2> "$o/attach.err"
echo "attach exit $? (job $P)" > "$o/attach_tty.txt"
wait $P
script -qfc "stty rows 30 cols 150; $G run --no-report -o $o/tty.db -- python3 -c 'import torch,time
x=torch.randn(8192,8192,device=\"cuda\")
for i in range(30):
    y=x@x; torch.cuda.synchronize(); print(\"step\",i,flush=True); time.sleep(0.5)'" "$o/tty.typescript" > /dev/null
{
  cat "$o/attach.err"
  cat "$o/attach_load.jsonl"
  python3 - "$o/attach.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("attach meta:", dict(c.execute("select key, value from meta where key in ('root_pid','runner','command')").fetchall()))
print("attach samples:", c.execute("select count(*), round(avg(util_gpu_pct),1), max(mem_used_kib)/1024 from gpu_samples").fetchone())
print("gpm sm% max:", c.execute("select max(sm_pm)/10.0 from gpm_samples").fetchone())
print("events:", c.execute("select kind, substr(payload,1,120) from events").fetchall())
PY
  echo "tty typescript: status rows drawn:"
  python3 - "$o/tty.typescript" <<'PY'
import sys
t = open(sys.argv[1], errors="replace").read()
rows = [seg.split("\x1b[0m")[0] for seg in t.split("\x1b[30;1H\x1b[2K\x1b[7m")[1:]]
print(len(rows), "status rows; scroll region set:", "\x1b[1;29r" in t, "; reset at exit:", "\x1b[r" in t)
for r in rows[-3:]:
    print("  ", r)
print(repr(t[-400:]))
PY
} >> "$o/attach_tty.txt" 2>&1
rm -f "$o/attach.err" "$o/attach_load.jsonl" "$o/tty.typescript" "$o/tty.db"
cat "$o/attach_tty.txt"
