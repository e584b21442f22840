#!/usr/bin/env bash
# Energy per step against the job's own reads of NVML's energy counter: a short job (inside one
# 30 s period of the recorder's energy reads) and a longer one (across one), each a BF16 matmul
# loop after an idle start-up, under `gpulse run`. Then NVLink on this machine: what nvidia-smi
# says of the links beside what `serve`'s /metrics exports for DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL,
# and top's roofline row in brief during a load (tmux). About 3 minutes.
# Usage: OUT=dir bash tools/device/verify_energy_nvlink.sh [gpulse]   (default: carry/gpulse)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_energy}; mkdir -p "$o"
export PYTHONPATH=$PWD/python
for spec in "short 5 12" "long 5 40"; do
  set -- $spec
  "$G" run --status off --no-report -o "$o/energy_$1.db" -- \
    python3 tools/device/energy_per_step.py "$2" "$3" "$o/truth_$1.json" > "$o/energy_$1.out" 2> "$o/energy_$1.err"
  echo "== energy $1 (idle $2 s, loop $3 s): exit $?"
  cat "$o/truth_$1.json"; echo
  grep -E "energy:|no energy per step" "$o/energy_$1.err"
done
echo "== nvlink: nvidia-smi"
nvidia-smi nvlink -s 2>&1 | head -5
nvidia-smi nvlink -gt d 2>&1 | head -5
nvidia-smi topo -m 2>&1 | head -4
echo "== nvlink: serve /metrics"
"$G" serve --listen 127.0.0.1:9477 --interval 500ms > "$o/serve.out" 2> "$o/serve.err" &
S=$!; sleep 3
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9477/metrics').read().decode())" > "$o/metrics.txt"
kill $S; wait $S 2>/dev/null
grep -c . "$o/metrics.txt"
grep -E "NVLINK" "$o/metrics.txt" | head -8 || true
echo "(no NVLINK lines above: none exported)"
echo "== top roofline, brief, during a BF16 load"
command -v tmux >/dev/null || echo "no tmux here"
T="tmux -L gpulse-energy"
$T kill-server 2>/dev/null
python3 tools/device/load.py 40 15 > "$o/load.log" 2>&1 &
L=$!
$T new-session -d -s gtop -x 200 -y 50 "$G top --interval 1s"
sleep 38
$T capture-pane -p -t gtop: > "$o/top.txt"
grep -n "roofline" "$o/top.txt" || tail -15 "$o/top.txt"
$T kill-server 2>/dev/null
wait $L
(cd "$o" && tar czf recordings.tgz ./*.db && rm -f ./*.db ./*.db-*)
