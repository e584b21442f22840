#!/usr/bin/env bash
# `gpulse top` on the H200 in tmux, beside nvidia-smi read at the same moment, at four moments:
# idle, a training (DataLoader-bound, under `gpulse run --instrument`), and a memory leak; plus
# the CPU gpulse top and nvitop (if installed) use at a 1 s refresh. Under 60 s.
# Usage: OUT=dir bash tools/device/verify_top.sh [gpulse]   (default: carry/gpulse)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_top}; mkdir -p "$o"
command -v tmux >/dev/null || { apt-get install -y -q tmux >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q tmux >/dev/null; }; }
T="tmux -L gpulse-verify"
Q=index,name,utilization.gpu,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,clocks_event_reasons.active
snap() { # name: the screen and nvidia-smi, taken together
    $T capture-pane -p -t top > "$o/top_$1.txt" &
    nvidia-smi --query-gpu=$Q --format=csv > "$o/smi_$1.csv" &
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv >> "$o/smi_$1.csv" &
    wait
}
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
$T kill-server 2>/dev/null
$T new-session -d -s top -x 200 -y 60 "TERM=xterm-256color $G top --interval 1s; echo EXIT=\$?; sleep 120"
sleep 3; snap idle
TOP=$(pgrep -P "$($T display -p -t top '#{pane_pid}')" | head -1)
t0=$(cpu_ticks "$TOP"); s0=$(date +%s.%N)
# A DataLoader-bound training under gpulse run --instrument (the fixtures' dl_bound workload, for
# 30 s); captured once top's own diagnosis is past its 30 s warm-up.
if [ -f tests/fixtures/h200-2026-11-29/workload.py ]; then
    "$G" run --instrument --status off --no-report -o "$o/dl.db" -- \
        python3 tests/fixtures/h200-2026-11-29/workload.py dl_bound 30 > "$o/dl_run.log" 2>&1 &
    RUN=$!
    sleep 29; snap training
    wait "$RUN"
fi
t1=$(cpu_ticks "$TOP"); s1=$(date +%s.%N)
# A leak, 12 s: the trend and the OOM forecast of the GPU it fills.
python3 tools/device/leak_uncaught.py 12 > "$o/leak.log" 2>&1 &
LEAK=$!
sleep 10; snap leak
wait "$LEAK" 2>/dev/null
$T send-keys -t top q; sleep 1; $T capture-pane -p -t top > "$o/top_after_quit.txt"
$T kill-server 2>/dev/null
tck=$(getconf CLK_TCK)
awk -v a="$t0" -v b="$t1" -v s="$s0" -v e="$s1" -v k="$tck" \
    'BEGIN{printf "gpulse top --interval 1s: %.2f%% of a core over %.0f s (H200)\n", (b-a)/k/(e-s)*100, e-s}' > "$o/cpu.txt"
# nvitop at the same interval, if installed, for 8 s.
if python3 -c 'import nvitop' 2>/dev/null; then
    $T new-session -d -s nv -x 200 -y 60 "TERM=xterm-256color python3 -m nvitop --interval 1; sleep 30"
    sleep 2; NV=$(pgrep -P "$($T display -p -t nv '#{pane_pid}')" | head -1)
    a=$(cpu_ticks "$NV"); s=$(date +%s.%N); sleep 8; b=$(cpu_ticks "$NV"); e=$(date +%s.%N)
    awk -v a="$a" -v b="$b" -v s="$s" -v e="$e" -v k="$tck" \
        'BEGIN{printf "nvitop --interval 1: %.2f%% of a core over %.0f s (H200)\n", (b-a)/k/(e-s)*100, e-s}' >> "$o/cpu.txt"
    $T kill-server 2>/dev/null
fi
rm -f "$o/dl.db" "$o/dl.db-wal" "$o/dl.db-shm"
cat "$o/cpu.txt"; for f in "$o"/top_*.txt; do echo "== $f"; cat "$f"; done; cat "$o"/smi_*.csv
