#!/usr/bin/env bash
# `gpulse top` on the H200 in tmux, beside nvidia-smi read at the same moment, at five moments:
# idle; a DataLoader-bound training under `gpulse run --instrument` (top finds the job and shows
# its steps/s, data wait and leading finding); a training with periodic stalls under `gpulse run
# --instrument`; a memory leak (the OOM forecast); with MOMENTS=holder, an idle process holding
# memory beside a training (its class `idle`); and after `q`. nvitop (if importable) runs in a
# second tmux session for the whole time, so both CPU figures cover the same seconds at a 1 s
# refresh. About 3 minutes; MOMENTS="leak" (any of training, stall, leak, holder; holder is not in
# the default) runs only those.
# Usage: OUT=dir bash tools/device/verify_top.sh [gpulse]   (default: carry/gpulse)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_top}; mkdir -p "$o/wl"
WL=tests/fixtures/h200-2026-11-29/workload.py
# Sessions are addressed as `NAME:`: a bare `top` is tmux's token for the top pane.
T="tmux -L gpulse-verify"
Q=index,name,utilization.gpu,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,clocks_event_reasons.active
snap() { # name: the screen and nvidia-smi, taken together
    local p=()
    $T capture-pane -p -t gtop: > "$o/top_$1.txt" & p+=($!)
    nvidia-smi --query-gpu=$Q --format=csv > "$o/smi_$1.csv" & p+=($!)
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$o/smi_apps_$1.csv" & p+=($!)
    # Per-process SM and memory-bandwidth shares (top's %SM and %GMBW), and the host's swap.
    nvidia-smi pmon -c 1 -s u > "$o/smi_pmon_$1.txt" 2>&1 & p+=($!)
    grep -E '^Swap(Total|Free):' /proc/meminfo > "$o/meminfo_$1.txt" & p+=($!)
    wait "${p[@]}"  # the captures only, not the training running beside them
    { ls -la "$JOBS"; cat "$JOBS"/*.json; } > "$o/jobs_$1.txt" 2>&1
}
# Where watches list themselves by default (no GPULSE_JOBS_DIR): docs/top.md.
if [ -d "${XDG_RUNTIME_DIR:-/nonexistent}" ]; then JOBS=$XDG_RUNTIME_DIR/gpulse/jobs; else JOBS=${TMPDIR:-/tmp}/gpulse-$(id -u)/jobs; fi
unset GPULSE_JOBS_DIR
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
child_of_pane() { pgrep -P "$($T display -p -t "$1" '#{pane_pid}')" | head -1; }
$T kill-server 2>/dev/null
M=${MOMENTS:-training stall leak}
# The holder starts 30 s before top, as a forgotten kernel sits there before anyone looks: the
# fill of its allocation is then older than what NVML's first per-process reading returns.
if [[ $M == *holder* ]]; then
python3 $WL hog 150 > "$o/hog.log" 2>&1 &
HOG=$!; sleep 30
fi
$T new-session -d -s gtop -x 200 -y 60 "TERM=xterm-256color $G top --interval 1s; echo EXIT=\$?; sleep 300"
NVITOP=0
if python3 -c 'import nvitop' 2>/dev/null; then
    $T new-session -d -s nvtop -x 200 -y 60 "TERM=xterm-256color python3 -m nvitop --interval 1; sleep 300"
    NVITOP=1
fi
sleep 3; snap idle
TOP=$(child_of_pane gtop:); [ $NVITOP = 1 ] && NV=$(child_of_pane nvtop:)
t0=$(cpu_ticks "$TOP"); [ $NVITOP = 1 ] && n0=$(cpu_ticks "$NV"); s0=$(date +%s.%N)
[ "$M" = leak ] && sleep 30
# The DataLoader-bound run, 50 s: captured at 46 s, past the job's own 30 s warm-up and top's,
# which starts when the job's process is first listed.
if [[ $M == *training* ]]; then
OUT=$o/wl "$G" run --instrument --status off --no-report -o "$o/dl.db" -- python3 $WL dl_bound 50 > "$o/dl_run.log" 2>&1 &
RUN=$!; sleep 46; snap training; wait $RUN
fi
# Periodic 3 s host stalls every 8 s in a bf16 transformer, 56 s: captured at 52 s. top's own
# findings are of this job only: the DataLoader run before it no longer shows.
if [[ $M == *stall* ]]; then
OUT=$o/wl "$G" run --instrument --status off --no-report -o "$o/stall.db" -- python3 $WL stall 56 > "$o/stall_run.log" 2>&1 &
RUN=$!; sleep 52; snap stall; wait $RUN
fi
# A leak, 44 s once its model is built (its first line; it grew 1.2 GiB a second on the H200). top
# diagnoses a GPU afresh when a new job takes it, with findings held 30 s from the job's first
# listing, as the job's own diagnosis holds them: the forecast needs that, 10 s of climb and the
# next 5 s diagnosis, so the capture comes 40 s in.
if [[ $M == *leak* ]]; then
python3 tools/device/leak_uncaught.py 44 > "$o/leak.log" 2>&1 &
LEAK=$!
for _ in $(seq 100); do grep -q start "$o/leak.log" 2>/dev/null && break; sleep 0.2; done
sleep 40; snap leak; wait $LEAK
fi
# The idle process holding 20 GiB (the fixtures' `hog`) beside a healthy transformer, 60 s:
# captured at 50 s, when top's diagnosis has seen the holder unchanged and idle through its
# window: its row's class is `idle`, the training's is not.
if [[ $M == *holder* ]]; then
python3 $WL healthy 60 > "$o/healthy.log" 2>&1 &
RUN=$!; sleep 50; snap holder
# The first row (by GPU, then PID: the holder) on its own screen, with its series.
$T send-keys -t gtop: Enter; sleep 3; $T capture-pane -p -t gtop: > "$o/top_holder_process.txt"
$T send-keys -t gtop: Escape; wait $RUN; kill $HOG
fi
t1=$(cpu_ticks "$TOP"); [ $NVITOP = 1 ] && n1=$(cpu_ticks "$NV"); s1=$(date +%s.%N)
$T capture-pane -p -t nvtop: > "$o/nvitop_last.txt" 2>/dev/null
$T send-keys -t gtop: q; sleep 1; $T capture-pane -p -t gtop: > "$o/top_after_quit.txt"
$T kill-server 2>/dev/null
sleep 1; pgrep -f "$G top" > /dev/null && echo "gpulse top still runs after q" >> "$o/cpu.txt"
tck=$(getconf CLK_TCK)
pct() { awk -v a="$1" -v b="$2" -v s="$s0" -v e="$s1" -v k="$tck" 'BEGIN{printf "%.3f", (b-a)/k/(e-s)*100}'; }
echo "over the same $(awk -v s="$s0" -v e="$s1" 'BEGIN{printf "%.0f", e-s}') s on the H200, 1 s refresh:" >> "$o/cpu.txt"
echo "gpulse top --interval 1s: $(pct "$t0" "$t1") % of a core" >> "$o/cpu.txt"
[ $NVITOP = 1 ] && echo "nvitop --interval 1 ($(python3 -c 'import nvitop; print(nvitop.__version__)')): $(pct "$n0" "$n1") % of a core" >> "$o/cpu.txt"
rm -rf "$o/wl" "$o"/*.db "$o"/*.db-wal "$o"/*.db-shm
cat "$o/cpu.txt"; for f in "$o"/top_*.txt; do echo "== $f"; cat "$f"; done; cat "$o"/smi_*.csv "$o"/smi_pmon_*.txt "$o"/meminfo_*.txt "$o"/jobs_*.txt
