#!/usr/bin/env bash
# The live ledger in /metrics: `gpulse run --serve --instrument` around a real training
# (ResNet-18, 2 DataLoader workers, 50 s), /metrics beside `nvidia-smi --query-gpu` at the same
# moment, then the summary with its ledger at exit.
# Usage: OUT=dir tools/device/verify_ledger_serve.sh [gpulse-binary]; writes ledger_serve.txt.
set -u
G=$(realpath "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify-ledger}; mkdir -p "$o"
export GPULSE_TOKEN=ledger-serve-check-token-0123
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
{
"$G" run --serve 127.0.0.1:9500 --instrument --no-report --status off -o "$o/train.db" -- \
  python3 tools/device/train_with_workers.py 50 2 > "$o/train.jsonl" 2> "$o/run.err" &
job=$!
for t in 35 45; do
  sleep $(( t == 35 ? 35 : 10 ))
  echo "### /metrics at about ${t} s, and nvidia-smi at the same moment"
  curl -s localhost:9500/metrics | grep -E '^gpulse_job|^DCGM_FI_DEV_GPU_UTIL'
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader
done
wait $job; echo "run exit $?"
echo "### the training's own lines"
tail -3 "$o/train.jsonl"
echo "### gpulse's stderr (the summary)"
cat "$o/run.err"
} > "$o/ledger_serve.txt" 2>&1
rm -f "$o/train.jsonl" "$o/run.err"
cat "$o/ledger_serve.txt" | grep -vE "^ +- " | head -70
