#!/usr/bin/env bash
# Trainings gpulse has never been fitted to (tools/device/unseen_trainings.py), each under
# `gpulse run` beside nvidia-smi, then `gpulse diagnose` of each, against the loop's own timing.
# UNSEEN_PY=tools/device/unseen_more.py runs the third set.
# Usage: OUT=dir bash tools/device/unseen_trainings.sh [gpulse] [seconds] [scenario...]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); secs=${2:-15}; shift 2 2>/dev/null || shift $#
scen=${*:-tokenize augment metrics gil_thread eval_inline launch}
o=${OUT:-/tmp/unseen}; mkdir -p "$o"; T=$o/truth.jsonl
for s in $scen; do
  echo "== $s"
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 >"$o/$s.smi" &
  smi=$!
  extra=(); case $s in augment|loader_30) extra=(--instrument);; esac
  PYTHONPATH=$PWD/python timeout $((secs + 90)) "$G" run --status off --no-report "${extra[@]}" -o "$o/$s.db" -- \
    python3 "${UNSEEN_PY:-tools/device/unseen_trainings.py}" "$s" "$secs" "$T" >"$o/$s.out" 2>&1
  echo "exit $?"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  "$G" diagnose "$o/$s.db" >"$o/$s.txt" 2>&1
  "$G" diagnose --format json "$o/$s.db" >"$o/$s.json" 2>&1
  python3 tools/device/unseen_check.py "$o" "$s"
done
rm -f "$o"/*.db-*
(cd "$o"; tar czf all.tgz *.db *.out *.txt *.json *.smi truth.jsonl; rm -f *.db *.out *.txt *.json *.smi)
