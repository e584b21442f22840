#!/usr/bin/env bash
# The gain a finding promises, measured: each scenario of unseen_trainings.py with its culprit and
# without it (UNSEEN_WITHOUT=1), plain python beside nothing else, alternating, ROUNDS times; the
# steps a second of each go to $OUT/ab.jsonl. Then the scenarios under `gpulse run`, whose
# "N× more steps/s without it" is read against the ratio.
# UNSEEN_PY=tools/device/unseen_more.py runs the third set.
# Usage: OUT=dir bash tools/device/unseen_ab.sh [gpulse] [seconds] [rounds] [scenario...]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); secs=${2:-10}; rounds=${3:-2}; shift 3 2>/dev/null || shift $#
scen=${*:-ckpt gc_heavy empty_cache cpu_interp pageable}
o=${OUT:-/tmp/unseen_ab}; mkdir -p "$o"
for r in $(seq "$rounds"); do
  for s in $scen; do
    for w in 0 1; do
      UNSEEN_WITHOUT=$w python3 "${UNSEEN_PY:-tools/device/unseen_trainings.py}" "$s" "$secs" "$o/ab.jsonl" >/dev/null 2>&1
    done
  done
done
python3 - "$o/ab.jsonl" <<'PY'
import json, sys, collections
rate = collections.defaultdict(list)
for l in open(sys.argv[1]):
    d = json.loads(l)
    rate[(d["scenario"], d["without"])].append(d["steps"] / d["loop_s"])
for s in sorted({k[0] for k in rate}):
    w, wo = rate[(s, False)], rate[(s, True)]
    print(f"{s}: {sum(w)/len(w):.2f} steps/s with, {sum(wo)/len(wo):.2f} without: {sum(wo)/len(wo)/(sum(w)/len(w)):.2f}x  {[round(x,2) for x in w]} {[round(x,2) for x in wo]}")
PY
