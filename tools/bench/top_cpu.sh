#!/usr/bin/env bash
# CPU of `gpulse top` and of nvitop at a 1 s refresh, side by side in tmux (200×60), against the
# stand-in NVML library and a scenario. Usage: tools/top_cpu.sh GPULSE LIBNVIDIA_ML SCENARIO [SECONDS]
set -eu
G=$(readlink -f "$1"); LIB=$(readlink -f "$2"); SC=$(readlink -f "$3"); N=${4:-30}
dir=$(mktemp -d); ln -s "$LIB" "$dir/libnvidia-ml.so.1"
T="tmux -L gpulse-top-cpu-$$"
$T new-session -d -s g -x 200 -y 60 "env TERM=xterm-256color GPULSE_NVML_LIB=$LIB GPULSE_FAKE_NVML_SCENARIO=$SC $G top --interval 1s; sleep 600"
$T new-session -d -s n -x 200 -y 60 "env TERM=xterm-256color LD_LIBRARY_PATH=$dir GPULSE_FAKE_NVML_SCENARIO=$SC python3 -m nvitop --interval 1; sleep 600"
sleep 5
pid() { pgrep -P "$($T display -p -t "$1" '#{pane_pid}')" | head -1; }
gp=$(pid g); np=$(pid n)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
g0=$(ticks "$gp"); n0=$(ticks "$np"); sleep "$N"; g1=$(ticks "$gp"); n1=$(ticks "$np")
k=$(getconf CLK_TCK)
awk -v a="$g0" -v b="$g1" -v c="$n0" -v d="$n1" -v k="$k" -v n="$N" \
    'BEGIN{printf "gpulse top: %.2f%% of a core; nvitop: %.2f%% of a core (%d s, 1 s refresh)\n", (b-a)/k/n*100, (d-c)/k/n*100, n}'
$T kill-server; rm -rf "$dir"
