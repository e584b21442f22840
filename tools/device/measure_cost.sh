#!/usr/bin/env bash
# What the always-on paths cost on the real driver, side by side under a light GPU load (a small
# matmul loop): % of one core over the same 40 s for nvidia-smi and gpulse loops and recorders,
# (with and without the Python main threads' stacks), one-shot medians of 15 interleaved runs,
# and GPULSE_PROFILE=1 tables (wall and CPU time of each part) of 20 s recordings and of one
# status. Finishes in about 75 s. Usage: OUT=dir tools/device/measure_cost.sh [gpulse] [seconds]
set -u
G=${1:-carry/gpulse}; S=${2:-40}; o=${OUT:-/tmp/measure_cost}; mkdir -p "$o"
F15=timestamp,index,name,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current
F5=timestamp,utilization.gpu,memory.used,temperature.gpu,power.draw
tmp=$(mktemp -d); R="$o/measure_cost.txt"; : > "$R"
now_ms() { date +%s%N | cut -c1-13; }
# CPU seconds of a process: ticks of all its threads, dead ones too (/proc/PID/stat), and the
# nanoseconds on CPU of its live threads (schedstat), for resolution finer than a tick.
ticks_s() { awk '{print ($14+$15)/100}' "/proc/$1/stat" 2>/dev/null || echo 0; }
sched_s() { cat /proc/$1/task/*/schedstat 2>/dev/null | awk '{n+=$1} END {printf "%.4f", n/1e9}'; }
{ echo "### machine"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; "$G" --version; } >> "$R" 2>&1

# A light load: small bf16 matmuls with a pause, so the GPU is busy part of each second.
python3 - "$((S + 25))" > "$tmp/load.log" 2>&1 <<'PY' &
import sys, time, torch
a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(50):
        a @ a
    torch.cuda.synchronize()
    time.sleep(0.02)
PY
LOAD=$!
sleep 4

# Every monitor at once, for the same S seconds after a 3 s start-up.
names=(); pids=()
start() { local name=$1; shift; "$@" > /dev/null 2>> "$tmp/err.log" & names+=("$name"); pids+=($!); }
start "nvidia-smi --query-gpu=<15> -l 1" nvidia-smi --query-gpu=$F15 --format=csv -l 1
start "gpulse query <15> -l 1" "$G" query --query-gpu=$F15 --format=csv -l 1
start "gpulse record --interval 1s" "$G" record --interval 1s -o "$tmp/r1s.db"
start "gpulse record --interval 100ms" "$G" record --interval 100ms -o "$tmp/r100ms.db"
start "gpulse record --interval 1s --no-stacks" "$G" record --interval 1s --no-stacks -o "$tmp/n1s.db"
start "gpulse record --interval 100ms --no-stacks" "$G" record --interval 100ms --no-stacks -o "$tmp/n100ms.db"
start "nvidia-smi --query-gpu=<15> -lms 100" nvidia-smi --query-gpu=$F15 --format=csv -lms 100
start "gpulse query <15> -lms 100" "$G" query --query-gpu=$F15 --format=csv -lms 100
# The profiles, beside them: 20 s of recording at each interval.
GPULSE_PROFILE=1 timeout 30 "$G" record --interval 1s --duration 20s -o "$tmp/p1s.db" 2> "$o/profile_record_1s.txt" &
P1=$!
GPULSE_PROFILE=1 timeout 30 "$G" record --interval 100ms --duration 20s -o "$tmp/p100ms.db" 2> "$o/profile_record_100ms.txt" &
P2=$!
sleep 3
declare -a t0 s0
for i in "${!pids[@]}"; do t0[$i]=$(ticks_s "${pids[$i]}"); s0[$i]=$(sched_s "${pids[$i]}"); done
a=$(now_ms); sleep "$S"; b=$(now_ms)
{
  echo "### % of one core over the same $(( (b - a) / 1000 )) s, side by side (after a 3 s start-up)"
  printf '%-40s %10s %10s %12s\n' monitor "cpu s" "% core" "% (sched)"
  for i in "${!pids[@]}"; do
    t1=$(ticks_s "${pids[$i]}"); s1=$(sched_s "${pids[$i]}")
    awk -v n="${names[$i]}" -v t0="${t0[$i]}" -v t1="$t1" -v s0="${s0[$i]}" -v s1="$s1" -v ms=$((b - a)) \
      'BEGIN {printf "%-40s %10.2f %10.3f %12.3f\n", n, t1 - t0, (t1 - t0) * 1e5 / ms, (s1 - s0) * 1e5 / ms}'
  done
} >> "$R"
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
wait "$P1" "$P2" 2>/dev/null
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done

# One-shot wall times, interleaved, under the same load.
{
  echo "### one-shot wall ms, 15 interleaved runs: median (min-max)"
  for i in $(seq 15); do
    c0=$(now_ms); nvidia-smi > /dev/null; c1=$(now_ms)
    "$G" status > /dev/null; c2=$(now_ms)
    nvidia-smi --query-gpu=$F5 --format=csv,noheader,nounits > /dev/null; c3=$(now_ms)
    "$G" query --query-gpu=$F5 --format=csv,noheader,nounits > /dev/null; c4=$(now_ms)
    echo "$((c1 - c0)) $((c2 - c1)) $((c3 - c2)) $((c4 - c3))"
  done > "$tmp/oneshot.txt"
  for k in 1 2 3 4; do
    label=$(echo "nvidia-smi|gpulse status|nvidia-smi --query-gpu=<5>|gpulse query <5>" | cut -d'|' -f$k)
    cut -d' ' -f$k "$tmp/oneshot.txt" | sort -n | awk -v l="$label" '{v[NR]=$1} END {printf "%-32s %6d  (%d-%d)\n", l, v[int((NR+1)/2)], v[1], v[NR]}'
  done
  echo "raw (smi, status, smi F5, query F5):"; cat "$tmp/oneshot.txt"
} >> "$R"
GPULSE_PROFILE=1 "$G" status > /dev/null 2> "$o/profile_status.txt"
{ echo "### samples written by the profiled recordings"
  for f in p1s p100ms; do python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(sys.argv[1].split('/')[-1], c.execute('select count(*) from gpu_samples').fetchone(), c.execute('select count(*) from gpm_samples').fetchone(), c.execute('select count(*) from gpu_state').fetchone())" "$tmp/$f.db"; done
  echo "### stderr of the monitors"; cat "$tmp/err.log"; } >> "$R" 2>&1
kill "$LOAD" 2>/dev/null; wait "$LOAD" 2>/dev/null
rm -rf "$tmp"
cat "$R"; echo; cat "$o/profile_record_1s.txt"
