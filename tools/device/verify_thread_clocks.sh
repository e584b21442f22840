#!/usr/bin/env bash
# What one snapshot cannot tell, on a real H200: the main thread's clocks and the GIL. Each
# mechanism of main_thread_workloads.py under `gpulse run` beside nvidia-smi (via
# verify_main_thread.sh), then pure Python and a sleep on a saturated host (verify_saturated.sh),
# then a DataLoader without workers under --instrument: its wait must name the dataset's line and
# leave out the advice the loader already follows. Writes everything under $OUT.
# Usage: OUT=dir [MECHS="gil fsync ..."] [SATURATED=0] bash tools/device/verify_thread_clocks.sh [gpulse] [seconds]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); secs=${2:-10}
o=${OUT:-/tmp/verify_thread_clocks}; mkdir -p "$o"
here=$(dirname "$0")
# shellcheck disable=SC2086
OUT=$o/mech bash "$here/verify_main_thread.sh" "$G" "$secs" ${MECHS:-python gil fsync native withlock pool sleep sync}
[ "${SATURATED:-1}" = 0 ] || OUT=$o/saturated bash "$here/verify_saturated.sh" "$G" 12 python
echo "== loader0 (--instrument)"
mkdir -p "$o/loader0"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 >"$o/loader0/smi.csv" &
smi=$!
PYTHONPATH=$PWD/python TRUTH="$o/loader0/truth.json" "$G" run --instrument --status off --no-report \
    -o "$o/loader0/loader0.db" -- python3 "$here/main_thread_workloads.py" loader0 "$secs" >"$o/loader0/out.txt" 2>&1
kill $smi 2>/dev/null; wait $smi 2>/dev/null
"$G" diagnose --format json "$o/loader0/loader0.db" >"$o/loader0/d.json"
python3 - "$o/loader0/d.json" "$o/loader0/truth.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
f = next(x for x in d["findings"] if x["id"] == "input_bound")
print("truth: next() %.1f s of %.1f s loop" % (t["mech_s"], t["loop_s"]))
print("input_bound:", f["title"][:160])
for k in ("dataloader", "loader_site", "loader_state", "worker_site"):
    print(" ", k, f["evidence"].get(k))
for a in f["advice"]: print("  advice:", a[:200])
PY
rm -f "$o"/*/*.db-*
