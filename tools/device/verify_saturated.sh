#!/usr/bin/env bash
# The main thread on a saturated host, on a real H200: verify_main_thread.sh's loops while shell
# loops keep every core busy. host_saturated reads a GPU active 10 s or more, so a shorter loop
# gets none.
# Usage: OUT=dir bash tools/device/verify_saturated.sh [gpulse] [seconds] [mech...]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); secs=${2:-16}; shift 2 2>/dev/null || shift $#
spin=()
for _ in $(seq "$(nproc)"); do timeout 600 sh -c 'while :; do :; done' & spin+=($!); done
OUT=${OUT:-/tmp/verify_saturated} bash "$(dirname "$0")/verify_main_thread.sh" "$G" "$secs" "${@:-python sleep}"
rc=$?
kill "${spin[@]}" 2>/dev/null; wait "${spin[@]}" 2>/dev/null
exit $rc
