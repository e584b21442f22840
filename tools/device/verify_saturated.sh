#!/usr/bin/env bash
# The main thread on a saturated host, on a real H200: every core kept busy by shell loops while
# a CUDA loop runs pure Python (then sleeps) between its steps; beside nvidia-smi at 500 ms.
# Each run's truth.json is the loop's own timing of its mechanism.
# Usage: OUT=dir [MECHS="python sleep"] [SECONDS_EACH=16] bash tools/device/verify_saturated.sh carry/gpulse
# (host_saturated reads a GPU active 10 s or more, so a loop shorter than that gets none).
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_saturated}; mkdir -p "$o"
export PYTHONPATH=$PWD/python
n=$(nproc); spin=()
for i in $(seq "$n"); do timeout 90 sh -c 'while :; do :; done' & spin+=($!); done
for mech in ${MECHS:-python sleep}; do
    nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 500 >"$o/$mech.smi" &
    smi=$!
    TRUTH="$o/$mech.truth.json" "$G" run --status off --no-report -o "$o/$mech.db" -- \
        python3 tools/device/main_thread_workloads.py "$mech" "${SECONDS_EACH:-16}" >"$o/$mech.out" 2>&1
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
    "$G" diagnose "$o/$mech.db" >"$o/$mech.txt" 2>&1
    "$G" diagnose --format json "$o/$mech.db" >"$o/$mech.json" 2>&1
done
kill "${spin[@]}" 2>/dev/null; wait 2>/dev/null
rm -f "$o"/*.db-*
cd "$o" && tar czf /tmp/saturated.tgz . && rm -f ./* && mv /tmp/saturated.tgz .
