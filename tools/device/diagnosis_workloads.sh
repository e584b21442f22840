#!/usr/bin/env bash
# Workloads with a known bottleneck, each beside a control, under `gpulse run`: the recordings the
# diagnosis tests read (tests/fixtures/h200-diagnosis/). Ground truth from each loop in truth.jsonl.
# Usage: OUT=dir diagnosis_workloads.sh [gpulse]   (from a checkout's root; about 4 minutes)
set -u
G=${1:-carry/gpulse}; o=${OUT:-/tmp/diag}; mkdir -p "$o"
W=tools/device/diagnosis_workloads.py
T=$o/truth.jsonl
START=$(date +%s)
one() { # name seconds [gpulse run options...]
  local s=$1 secs=$2; shift 2
  # Past 240 s the rest is skipped, so that what ran still comes back inside a 5-minute call.
  if (( $(date +%s) - START > 240 )); then echo "$s skipped" >> "$o/exits.txt"; return; fi
  PYTHONPATH=python timeout $((secs + 40)) $G run --status off --no-report --interval 500ms "$@" -o "$o/$s.db" -- \
    python3 $W $s $secs $T > "$o/$s.out" 2>&1
  echo "$s exit $? at $(( $(date +%s) - START )) s" >> "$o/exits.txt"
}
burn() { BURNERS=(); for _ in $(seq "$(nproc)"); do python3 -c 'while True: pass' & BURNERS+=($!); done; sleep 1; }
unburn() { for p in "${BURNERS[@]}"; do kill "$p"; done; wait "${BURNERS[@]}" 2>/dev/null; }
one transfer_pageable 15
one transfer_pinned 15
one fp32_matmul 12
one bf16_matmul 12
one epoch_restart 22 --instrument
one epoch_persistent 22 --instrument
burn; one starved_loader 15; one gpu_bound 15; unburn
one lightning 22
one hf 22
nvidia-smi -q -d PCIE > "$o/pcie.txt" 2>&1
# At most a few files come back: the recordings in one archive, the rest in another.
(cd "$o"; tar czf recordings.tgz *.db; tar czf outputs.tgz *.out exits.txt pcie.txt; rm -f *.db *.out *.html pcie.txt)
cat "$o/exits.txt" "$T"
