#!/usr/bin/env bash
# What --instrument costs a launch-bound loop (the fixtures' `tiny`: thousands of steps a second),
# and how its marks fold: the same 20 s run plain, under `gpulse run`, and under
# `gpulse run --instrument`. Usage: OUT=dir instrument_overhead.sh [gpulse]
set -u
G=${1:-carry/gpulse}; o=${OUT:-/tmp/overhead}; mkdir -p "$o"
W=tests/fixtures/h200-2026-11-29/workload.py
steps() { python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]['steps'])" "$1"; }
for round in 1 2; do
  mkdir -p "$o/plain" "$o/run" "$o/inst"
  OUT=$o/plain python3 $W tiny 20
  echo "round $round plain: $(steps $o/plain/steps_tiny.jsonl) steps in 20 s" >> "$o/overhead.txt"
  OUT=$o/run $G run --status off --no-report -o "$o/run$round.db" -- python3 $W tiny 20 2> /dev/null
  echo "round $round gpulse run: $(steps $o/run/steps_tiny.jsonl) steps in 20 s" >> "$o/overhead.txt"
  OUT=$o/inst $G run --instrument --status off --no-report -o "$o/tiny_instrumented$round.db" -- python3 $W tiny 20 2> "$o/inst.err"
  echo "round $round gpulse run --instrument: $(steps $o/inst/steps_tiny.jsonl) steps in 20 s" >> "$o/overhead.txt"
done
{
  sed -n '/── gpulse ──/,$p' "$o/inst.err" | grep -vE "^ +- "
  python3 - "$o/tiny_instrumented2.db" <<'PY'
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("marker rows by kind:", c.execute("select kind, count(*), sum(count) from markers group by kind").fetchall())
print("file bytes:", os.path.getsize(sys.argv[1]))
print("events:", c.execute("select kind, substr(payload, 1, 100) from events where kind != 'finding'").fetchall())
PY
} >> "$o/overhead.txt" 2>&1
rm -rf "$o/plain" "$o/run" "$o/inst" "$o"/run*.db "$o/inst.err" "$o/tiny_instrumented1.db"
cat "$o/overhead.txt"
