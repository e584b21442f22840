#!/usr/bin/env bash
# Calibrates gpulse's roofline estimate on the GPU machine (H200, PyTorch): BF16, FP16, TF32, FP32
# and FP64 GEMMs of known FLOPs and device-to-device copies of known bytes, each about 10 s timed
# with CUDA events under `gpulse run` (which records the GPM pipes the estimate reads), then a
# table of the computed rate beside gpulse's estimate (the roofline line of each run's summary).
# Needs no network and no Rust toolchain. About 2 minutes of GPU time.
# Usage: OUT=dir tools/device/calibrate_roofline.sh [gpulse]   (from a checkout's root)
set -u
G=${1:-carry/gpulse}; o=${OUT:-/tmp/roofline}; mkdir -p "$o"
P=tools/device/calibrate_roofline.py
T=$o/truth.jsonl; rm -f "$T"
START=$(date +%s)
for kind in bf16 fp16 tf32 fp32 fp64 copy; do
  # Past 240 s the rest is skipped, so that what ran still comes back inside a 5-minute call.
  if (( $(date +%s) - START > 240 )); then echo "$kind skipped" >> "$o/exits.txt"; continue; fi
  timeout 90 "$G" run --status off --no-report --interval 200ms --gpm-interval 200ms -o "$o/$kind.db" -- \
    python3 "$P" "$kind" 10 "$T" > "$o/$kind.out" 2> "$o/$kind.err"
  echo "$kind exit $? at $(( $(date +%s) - START )) s" >> "$o/exits.txt"
done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
python3 "$P" --table "$T" "$o" | tee "$o/table.md"
# At most a few files come back: the recordings in one archive, the rest in another.
(cd "$o"; tar czf recordings.tgz ./*.db; tar czf outputs.tgz ./*.out ./*.err exits.txt gpu.txt; rm -f ./*.db ./*.out ./*.err ./*.db-* exits.txt gpu.txt)
ls -l "$o"
