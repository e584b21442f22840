#!/bin/bash
# The diagnosis's sentences on a real H200, each beside nvidia-smi at the same moment:
# a clean exit after memory growth (no OOM), a process idle after its work (its stretch named),
# a job that uses no GPU beside a busy process (not healthy, no roofline), a job sharing its GPU
# (gpu_shared with the other's SM share, beside `nvidia-smi pmon`), and DataLoader workers
# oversubscribing the cores. Usage: tools/device/verify_sentences.sh carry/gpulse; results in $OUT.
set -u
G=$(realpath "$1"); W=$(realpath tools/device/sentences_workloads.py)
O=${OUT:-/tmp/out}; mkdir -p "$O"; cd "$O"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,memory.total --format=csv -lms 500 > smi.csv &
SMI=$!
nvidia-smi pmon -s um -d 1 > pmon.txt &
PMON=$!
diag() { "$G" diagnose --format json "$1.db" > "$1.json" 2> "$1.diag.err"; "$G" diagnose "$1.db" > "$1.txt" 2>&1; }

"$G" run -o grow.db -- python3 "$W" grow_exit > grow.out 2> grow.err; echo "grow exit $?" >> codes.txt; diag grow
"$G" run -o hold.db -- python3 "$W" compute_hold > hold.out 2> hold.err; echo "hold exit $?" >> codes.txt; diag hold

python3 "$W" busy 40 & BUSY=$!
sleep 4
"$G" run -o nogpu.db -- sleep 12 > nogpu.out 2> nogpu.err; echo "nogpu exit $?" >> codes.txt; diag nogpu
"$G" run -o shared.db -- python3 "$W" light 15 > shared.out 2> shared.err; echo "shared exit $?" >> codes.txt; diag shared
wait $BUSY

nproc > cores.txt
"$G" run -o threads.db -- python3 "$W" threads > threads.out 2> threads.err; echo "threads exit $?" >> codes.txt; diag threads
kill $SMI $PMON 2>/dev/null; wait 2>/dev/null
for f in grow hold nogpu shared threads; do
  python3 - "$f.json" <<'PY' >> summary.txt
import json, sys
v = json.load(open(sys.argv[1]))
print("==", sys.argv[1])
for f in v["findings"]:
    print(" ", f["severity"], f["id"], "|", f["title"])
for a in v.get("ledger", {}).get("accounts", []):
    print("   ledger", a["account"], a["seconds"], a["share"], a["label"])
print("   efficiency", len(v.get("efficiency") or []))
PY
done

# First contact on the real driver: watch's count and timing, --listen with a host name,
# record --pid ending with its process, status --no-gpm's words.
{
  /usr/bin/time -f "watch -i 1s -n 2: %e s" "$G" watch -i 1s -n 2 > watch.txt 2>&1
  "$G" watch -n 0 > watch0.txt 2>&1; echo "watch -n 0 exit $?"
  PORT=9477
  "$G" serve --listen localhost:$PORT > serve.out 2>&1 & SERVE=$!
  sleep 3
  python3 - "$PORT" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen(f"http://localhost:{sys.argv[1]}/metrics", timeout=5).read().decode()
print("metrics lines", len(body.splitlines()), "DCGM_FI_DEV_GPU_UTIL" in body)
PY
  kill $SERVE; wait $SERVE 2>/dev/null
  sleep 2 & P=$!
  start=$(date +%s.%N); "$G" record --pid $P -o pid.db > pid.out 2>&1; end=$(date +%s.%N)
  echo "record --pid of a 2 s process ended after $(python3 -c "print(round($end-$start,2))") s"
  "$G" status --no-gpm 2>&1 | grep -i gpm | head -2
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
} > first_contact.txt 2>&1
