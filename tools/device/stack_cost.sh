#!/usr/bin/env bash
# What sampling the main thread costs, on a real training loop with a 50-frame main thread among
# nine threads (main_thread_workloads.py deep): gpulse's sampler thread (gpulse-stacks) against
# `py-spy record --nonblocking` at the same rate on the same job, CPU seconds per sample from
# each one's own tick counts, and the job's steps/s with no sampler (twice, for the noise), with
# gpulse's and with py-spy's. Usage: OUT=dir bash tools/device/stack_cost.sh [gpulse] [seconds]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); secs=${2:-30}
o=${OUT:-/tmp/stack_cost}; mkdir -p "$o"
export PYTHONPATH=$PWD/python
pip install --quiet --no-index carry/py_spy-*.whl 2>/dev/null || true
PYSPY=$(command -v py-spy)
tck=$(getconf CLK_TCK)
# The newest process whose command line contains $1, or starts with it when $2 is "prefix" (no
# pgrep on every machine).
newest() { python3 - "$1" "${2:-}" <<'PY'
import os, sys
best = None
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == os.getpid():
        continue
    try:
        cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError:
        continue
    hit = cmd.startswith(sys.argv[1]) if sys.argv[2] == "prefix" else sys.argv[1] in cmd
    if hit and not cmd.startswith("python3 - "):
        best = max(best or 0, int(p))
print(best or "")
PY
}
job() { TRUTH="$o/$1.truth.json" "$G" run --status off --no-report -o "$o/$1.db" "${@:2}" -- \
    python3 tools/device/main_thread_workloads.py deep "$secs" >"$o/$1.out" 2>&1; }
rate() { python3 -c "import json;t=json.load(open('$o/$1.truth.json'));print(round(t['steps']/t['loop_s'],3))"; }
# Ticks of gpulse's sampler thread, read each 0.5 s until the run ends: the last read stands.
watch_sampler() {
    while sleep 0.5; do
        # gpulse and its forked keeper of the job's stderr share a command line: look in both.
        for t in /proc/[0-9]*/task/*; do
            [ "$(cat "$t/comm" 2>/dev/null)" = gpulse-stacks ] || continue
            grep -qa -- "$o/$1.db" "${t%/task/*}/cmdline" 2>/dev/null || continue
            awk -v tck="$tck" '{sub(/.*\) /,""); print ($12+$13)/tck}' "$t/stat" >"$o/$1.sampler_cpu_s" 2>/dev/null
        done
    done
}
job nostacks1 --no-stacks; job nostacks2 --no-stacks
watch_sampler gpulse & w=$!
job gpulse; kill $w
samples=$("$G" diagnose --format json "$o/gpulse.db" | python3 -c "import json,sys;s=json.load(sys.stdin)['stacks'][0];print(s['samples'],s['rate_hz'])")
set -- $samples; n=$1; hz=$2
echo "gpulse: $n samples at $hz Hz, sampler thread $(cat "$o/gpulse.sampler_cpu_s") CPU s"
# py-spy at gpulse's own rate, on the same job, started as soon as the job's python is up.
hzi=$(python3 -c "print(max(1, round($hz)))")
( job pyspy --no-stacks ) & r=$!
pid=""; for _ in $(seq 100); do pid=$(newest "python3 tools/device/main_thread_workloads.py deep" prefix); [ -n "$pid" ] && break; sleep 0.1; done
/usr/bin/time -f "%U %S" -o "$o/pyspy.time" "$PYSPY" record --nonblocking --rate "$hzi" -p "$pid" -f raw -o "$o/pyspy.raw" >"$o/pyspy.log" 2>&1
wait $r
pyn=$(awk '{n+=$NF} END {print n}' "$o/pyspy.raw" 2>/dev/null)
echo "py-spy: $pyn samples at $hzi Hz, $(awk '{print $1+$2}' "$o/pyspy.time") CPU s"
python3 - "$o" "$n" "$hz" "${pyn:-0}" "$secs" <<EOF
import sys
o, n, hz, pyn, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4] or 0), float(sys.argv[5])
g = float(open(f"{o}/gpulse.sampler_cpu_s").read())
p = sum(map(float, open(f"{o}/pyspy.time").read().split()[-2:]))
print(f"per sample: gpulse {1e6*g/max(n,1):.0f} us, py-spy {1e6*p/max(pyn,1):.0f} us, ratio {(g/max(n,1))/(p/max(pyn,1)):.2f}")
print(f"share of a core over the {secs:.0f} s loop: gpulse {100*g/secs:.2f}%, py-spy {100*p/secs:.2f}%")
EOF
for r in nostacks1 nostacks2 gpulse pyspy; do echo "steps/s $r $(rate $r)"; done
ls -la "$o"/gpulse.db | awk '{print "recording bytes", $5}'
rm -f "$o"/*.db-* "$o"/pyspy.raw
