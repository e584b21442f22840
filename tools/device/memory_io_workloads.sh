#!/usr/bin/env bash
# The job's private memory and storage I/O (tools/device/memory_io_workloads.py), each under
# `gpulse run --interval 500ms` with GPULSE_PROFILE=1 (what the /proc reads cost, at exit), then
# `gpulse diagnose` of each recording; everything comes back in one archive.
# Usage: OUT=dir memory_io_workloads.sh [gpulse]   (from a checkout's root; about 3 minutes)
set -u
G=${1:-carry/gpulse}; o=${OUT:-/tmp/memio}; mkdir -p "$o"
W=tools/device/memory_io_workloads.py
T=$o/truth.jsonl
START=$(date +%s)
one() { # name seconds [gpulse run options...]
  local s=$1 secs=$2; shift 2
  if (( $(date +%s) - START > 300 )); then echo "$s skipped" >> "$o/exits.txt"; return; fi
  GPULSE_PROFILE=1 PYTHONPATH=python timeout $((secs + 90)) $G run --status off --no-report --interval 500ms "$@" \
    -o "$o/$s.db" -- python3 $W $s $secs $T > "$o/$s.out" 2>&1
  echo "$s exit $? at $(( $(date +%s) - START )) s" >> "$o/exits.txt"
  $G diagnose "$o/$s.db" > "$o/$s.diagnose.txt" 2>&1
  $G diagnose --format json "$o/$s.db" > "$o/$s.diagnose.json" 2>&1
}
one worker_copy 25
one worker_arrays 20
one ckpt_plain 20
one storage 15 --instrument
cat "$o/exits.txt"
for f in "$o"/*.out; do echo "== $f"; grep -E "proc tree|total poll|wall" "$f" | head -8; done
(cd "$o"; tar czf all.tgz *.db *.out *.txt *.json truth.jsonl; rm -f *.db *.out *.txt *.json truth.jsonl)
