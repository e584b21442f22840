#!/usr/bin/env bash
# Workloads whose wall time is known account by account (tools/device/ledger_workloads.py), each
# under `gpulse run --interval 500ms`, then `gpulse diagnose` of each recording. Beside the plain
# pageable run, nvidia-smi dmon reads utilization and PCIe traffic at the same moments.
# Usage: OUT=dir ledger_workloads.sh [gpulse]   (from a checkout's root; about 4 minutes)
set -u
G=${1:-carry/gpulse}; o=${OUT:-/tmp/ledger}; mkdir -p "$o"
W=tools/device/ledger_workloads.py
T=$o/truth.jsonl
START=$(date +%s)
one() { # name seconds [gpulse run options...]
  local s=$1 secs=$2; shift 2
  if (( $(date +%s) - START > 330 )); then echo "$s skipped" >> "$o/exits.txt"; return; fi
  PYTHONPATH=python timeout $((secs + 60)) $G run --status off --no-report --interval 500ms "$@" -o "$o/$s.db" -- \
    python3 $W $s $secs $T > "$o/$s.out" 2>&1
  echo "$s exit $? at $(( $(date +%s) - START )) s" >> "$o/exits.txt"
  $G diagnose "$o/$s.db" > "$o/$s.diagnose.txt" 2>&1
}
one slow_val 20
one fast_val 15
one pageable 15 --instrument
nvidia-smi dmon -s ut -d 1 -o T > "$o/dmon_pageable_plain.txt" 2>&1 &
DMON=$!
one pageable_plain 15
kill $DMON
one checkpoint 20 --instrument
one epoch_short 12 --instrument
one compile 10 --instrument
for f in "$o"/*.db; do $G diagnose --format json "$f" > "${f%.db}.diagnose.json" 2>&1; done
cat "$o/exits.txt" "$T"
# Only a few files come back: everything in one archive.
(cd "$o"; tar czf all.tgz *.db *.out *.txt *.json truth.jsonl; rm -f *.db *.out *.txt *.json truth.jsonl)
