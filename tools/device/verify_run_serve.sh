#!/usr/bin/env bash
# `gpulse run --serve --instrument` around a real training (ResNet-18, 2 DataLoader workers, 40 s):
# the job's steps/s and data wait in /metrics while it runs, beside the training's own step count,
# then the summary at exit. Usage: OUT=dir tools/device/verify_run_serve.sh [gpulse-binary];
# writes run_serve.txt and the recording.
set -u
G=$(realpath "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify-run-serve}; mkdir -p "$o"
export GPULSE_TOKEN=run-serve-check-token-0123
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
{
"$G" run --serve 127.0.0.1:9500 --instrument --no-report --status off -o "$o/train.db" -- \
  python3 tools/device/train_with_workers.py 40 2 > "$o/train.jsonl" 2> "$o/run.err" &
job=$!
for t in 15 25 35; do
  sleep 10
  echo "### /metrics at about ${t} s"
  curl -s localhost:9500/metrics | grep -E '^gpulse_(job|finding|tree)|^DCGM_FI_(DEV_GPU_UTIL|PROF_SM_ACTIVE|DEV_FB_USED)'
  curl -s -H "Authorization: Bearer $GPULSE_TOKEN" localhost:9500/api/v1/snapshot | python3 -c 'import json,sys; s=json.load(sys.stdin); print("snapshot steps:", s["steps"], "findings:", [f["id"] for f in s["findings"]])'
done
wait $job; echo "run exit $?"
echo "### the training's own lines"
cat "$o/train.jsonl"
echo "### gpulse's stderr (the summary)"
cat "$o/run.err"
} > "$o/run_serve.txt" 2>&1
cat "$o/run_serve.txt" | head -60
