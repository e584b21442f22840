#!/usr/bin/env bash
# What `gpulse run --instrument` costs the training itself: steps/s of the same loop run plain
# and under `gpulse run --instrument`, interleaved (the order swaps every round), for a ResNet-50,
# GPT-2 small and the launch-bound `tiny` loop (pinned to one core, as launch-bound loops are
# sensitive to where the scheduler puts them). Each run warms up 4 s and counts steps over 8 s.
# Usage: OUT=dir [MODES="tiny resnet transformer"] [WARM=4] [MEASURE=8] instrument_cost.sh [gpulse] [rounds]
# A run takes 15–35 s with the imports and the data set up (3 rounds of all three ≈ 10 min).
set -u
G=$(readlink -f "${1:-carry/gpulse}"); R=${2:-3}; o=${OUT:-/tmp/instrument_cost}; mkdir -p "$o/runs"
W=$(readlink -f tools/device/instrument_workloads.py)
export PYTHONUNBUFFERED=1
one() { # mode variant round
    local pin=""; [ "$1" = tiny ] && pin="taskset -c 3"
    local res="$o/runs/$1-$2-$3.json"
    case $2 in
        plain) $pin python3 "$W" "$1" "${WARM:-4}" "${MEASURE:-8}" "$res" ;;
        instrumented) "$G" run --instrument --status off --no-report -o "$o/runs/$1-$3.db" -- \
            $pin python3 "$W" "$1" "${WARM:-4}" "${MEASURE:-8}" "$res" 2>> "$o/gpulse.err" ;;
    esac
}
for r in $(seq 1 "$R"); do
    for m in ${MODES:-tiny resnet transformer}; do
        if [ $((r % 2)) = 1 ]; then one $m plain $r; one $m instrumented $r; else one $m instrumented $r; one $m plain $r; fi
    done
done
python3 - "$o/runs" > "$o/instrument_cost.txt" <<'PY'
import glob, json, os, statistics, sys
runs = {}
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    mode, variant, rnd = os.path.basename(p)[:-5].split("-")
    runs.setdefault(mode, {}).setdefault(variant, {})[rnd] = json.load(open(p))["steps_per_s"]
# Rounds vary more than the variants do (launch-bound loops by 2x on this machine), so each
# round's pair is compared: the median of the rounds' ratios is the figure.
print("loop | plain steps/s (each round) | --instrument steps/s (each round) | ratio each round | median ratio")
for mode, v in runs.items():
    p, i = v.get("plain", {}), v.get("instrumented", {})
    both = sorted(set(p) & set(i), key=int)
    if both:
        ratios = [i[r] / p[r] for r in both]
        med = statistics.median(ratios)
        print(f"{mode} | {', '.join(f'{p[r]:.2f}' for r in both)} | {', '.join(f'{i[r]:.2f}' for r in both)} | "
              f"{', '.join(f'{x:.4f}' for x in ratios)} | {med:.4f} ({(med - 1) * 100:+.2f} %)")
PY
for db in "$o"/runs/*-1.db; do
    [ -f "$db" ] && python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(sys.argv[1].rsplit('/',1)[1], 'marks:', c.execute('select kind, sum(count) from markers group by kind').fetchall())" "$db" >> "$o/instrument_cost.txt"
done
rm -f "$o"/runs/*.db "$o"/runs/*.db-wal "$o"/runs/*.db-shm
cat "$o/instrument_cost.txt"
