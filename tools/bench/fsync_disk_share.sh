#!/usr/bin/env bash
# The fsync loop of tests/cli/thread_clocks.rs (tests/python/jobs/fsync_loop.py) under
# `gpulse run`, ROUNDS times: the disk account against the loop's own timing (its calls' wall
# time less their wait for a core, by its own schedstat), and the rate the sampler reached within
# its budget. No GPU needed.
# Usage: tools/bench/fsync_disk_share.sh GPULSE [ROUNDS] [BUSY]   (BUSY: `yes` processes beside it)
set -u
G=$(readlink -f "$1"); rounds=${2:-6}; busy=${3:-0}
job=$(dirname "$(readlink -f "$0")")/../../tests/python/jobs/fsync_loop.py
d=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$d"' EXIT
echo '{"init_error": 9, "devices": []}' >"$d/sc.json"
for _ in $(seq "$busy"); do yes >/dev/null & done
for _ in $(seq "$rounds"); do
  rm -f "$d"/r.db*
  GPULSE_FAKE_NVML_SCENARIO="$d/sc.json" "$G" run --status off --no-report --interval 200ms --stacks-hz 100 \
    -o "$d/r.db" -- python3 "$job" "$d/t.json" "$d/data.bin" >/dev/null 2>&1
  "$G" diagnose --format json "$d/r.db" | python3 -c "
import json, sys
d = json.load(sys.stdin); t = json.load(open(sys.argv[1])); w = d['ledger']['wall_s']
disk = sum(a['seconds'] for a in d['ledger']['accounts'] if a['account'] == 'main_thread_disk') / w
truth = (t['io_s'] - t['io_queued_s']) / w
print(f'disk {disk:.3f} loop {truth:.3f} diff {disk - truth:+.3f} rate {d[\"stacks\"][0][\"rate_hz\"]} Hz')" "$d/t.json"
done
