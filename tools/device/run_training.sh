#!/usr/bin/env bash
# `gpulse run` on real PyTorch jobs: the fixtures' dl_bound and dl_tuned under --instrument, an
# uncaught memory leak, and a short run on a pseudo-terminal (the status row); nvidia-smi logs
# beside each. Usage: OUT=dir run_training.sh [gpulse] [seconds]
set -u
G=${1:-carry/gpulse}; S=${2:-40}; o=${OUT:-/tmp/runs}; mkdir -p "$o"
W=tests/fixtures/h200-2026-11-29/workload.py
smi() { nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,nounits -lms 500 > "$o/$1.smi.csv" & SMI=$!; }
for s in dl_bound dl_tuned; do
  smi $s
  OUT=$o $G run --instrument --status line --status-every 10s -o "$o/$s.db" -- python3 $W $s $S > "$o/$s.stdout" 2> "$o/$s.stderr"
  echo "$s exit $?" >> "$o/exits.txt"
  kill $SMI
done
smi leak
$G run --status line --status-every 5s -o "$o/leak.db" -- python3 tools/device/leak_uncaught.py 150 > "$o/leak.stdout" 2> "$o/leak.stderr"
echo "leak exit $?" >> "$o/exits.txt"
kill $SMI
# A pseudo-terminal: the job's output scrolls above gpulse's status row.
script -qfc "stty rows 30 cols 150; $G run -o $o/tty.db -- python3 -c 'import torch,time
x=torch.randn(8192,8192,device=\"cuda\")
for i in range(40):
    y=x@x; torch.cuda.synchronize(); print(\"step\",i,flush=True); time.sleep(0.5)'" "$o/tty.typescript" > /dev/null
$G compare "$o/dl_bound.db" "$o/dl_tuned.db" > "$o/compare.txt" 2>&1
python3 tools/device/check_runs.py "$o" "$G" > "$o/run_summary.txt" 2>&1
# At most a few files come back: the recordings, the summary, and the rest in one archive.
(cd "$o" && tar czf run_extras.tgz *.stderr *.stdout *.jsonl *.smi.csv tty.typescript compare.txt exits.txt 2>/dev/null
 rm -f *.stderr *.stdout *.jsonl *.smi.csv tty.typescript compare.txt exits.txt *.html tty.db)
cat "$o/run_summary.txt"
