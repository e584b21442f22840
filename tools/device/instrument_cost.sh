#!/usr/bin/env bash
# What `gpulse run --instrument` costs the training itself: steps/s of the same loop run plain
# and under `gpulse run --instrument`, interleaved (the order swaps every round), for a ResNet-50,
# GPT-2 small and the launch-bound `tiny` loop (pinned to one core, as launch-bound loops are
# sensitive to where the scheduler puts them). Each run warms up 4 s and counts steps over 8 s.
# Usage: OUT=dir instrument_cost.sh [gpulse] [rounds]   (about 18 s a run; 3 rounds ≈ 5.5 min)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); R=${2:-3}; o=${OUT:-/tmp/instrument_cost}; mkdir -p "$o/runs"
W=$(readlink -f tools/device/instrument_workloads.py)
export PYTHONUNBUFFERED=1
one() { # mode variant round
    local pin=""; [ "$1" = tiny ] && pin="taskset -c 3"
    local res="$o/runs/$1-$2-$3.json"
    case $2 in
        plain) $pin python3 "$W" "$1" 4 8 "$res" ;;
        instrumented) "$G" run --instrument --status off --no-report -o "$o/runs/$1-$3.db" -- \
            $pin python3 "$W" "$1" 4 8 "$res" 2>> "$o/gpulse.err" ;;
    esac
}
for r in $(seq 1 "$R"); do
    for m in tiny resnet transformer; do
        if [ $((r % 2)) = 1 ]; then one $m plain $r; one $m instrumented $r; else one $m instrumented $r; one $m plain $r; fi
    done
done
python3 - "$o/runs" > "$o/instrument_cost.txt" <<'PY'
import glob, json, os, statistics, sys
runs = {}
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    mode, variant, rnd = os.path.basename(p)[:-5].split("-")
    runs.setdefault(mode, {}).setdefault(variant, []).append(json.load(open(p))["steps_per_s"])
print("loop | plain steps/s (each round) | --instrument steps/s (each round) | median ratio")
for mode, v in runs.items():
    p, i = v.get("plain", []), v.get("instrumented", [])
    if p and i:
        ratio = statistics.median(i) / statistics.median(p)
        print(f"{mode} | {statistics.median(p):.2f} ({', '.join(f'{x:.2f}' for x in p)}) | "
              f"{statistics.median(i):.2f} ({', '.join(f'{x:.2f}' for x in i)}) | {ratio:.4f} ({(ratio - 1) * 100:+.2f} %)")
PY
for db in "$o"/runs/*-1.db; do
    [ -f "$db" ] && python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(sys.argv[1].rsplit('/',1)[1], 'marks:', c.execute('select kind, sum(count) from markers group by kind').fetchall())" "$db" >> "$o/instrument_cost.txt"
done
rm -f "$o"/runs/*.db "$o"/runs/*.db-wal "$o"/runs/*.db-shm
cat "$o/instrument_cost.txt"
