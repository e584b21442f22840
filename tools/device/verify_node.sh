#!/usr/bin/env bash
# `serve` and `record` (no --pid) beside two real CUDA jobs that gpulse did not start: one
# host-bound (Python between steps), one GPU-bound. Beside them nvidia-smi at the same moments, a
# `serve --no-stacks` as the baseline of CPU cost, and each job's own timing ($o/*.truth.json).
# Writes /metrics, /api, both recordings' diagnoses and a summary under $OUT.
# Usage: OUT=dir bash tools/device/verify_node.sh [gpulse] [seconds]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); secs=${2:-45}
o=${OUT:-/tmp/verify_node}; mkdir -p "$o"
export PYTHONPATH=$PWD/python
TRUTH=$o/python.truth.json python3 tools/device/main_thread_workloads.py python "$secs" >"$o/python.out" 2>&1 &
P1=$!
TRUTH=$o/gpu_bound.truth.json python3 tools/device/main_thread_workloads.py gpu_bound "$secs" >"$o/gpu_bound.out" 2>&1 &
P2=$!
sleep 10
echo "host-bound $P1, GPU-bound $P2" >"$o/pids.txt"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >"$o/apps.csv"
nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 500 >"$o/smi.csv" &
SMI=$!
"$G" serve --no-auth --listen 127.0.0.1:9400 --interval 1s --record "$o/served.db" 2>"$o/serve.err" &
S1=$!
"$G" serve --no-auth --listen 127.0.0.1:9401 --interval 1s --no-stacks 2>"$o/serve_nostacks.err" &
S2=$!
"$G" record --interval 1s --duration 20s -o "$o/recorded.db" 2>"$o/record.err" &
R=$!
sleep 3
ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
# The tool a user would otherwise run: py-spy on each process, at the rate gpulse keeps on a busy
# GPU (12.5 Hz), over the same window; its CPU from the kernel's account of the children.
pip install --quiet --no-index carry/py_spy-*.whl 2>/dev/null || true
python3 - "$P1" "$P2" >"$o/pyspy_cost.txt" 2>&1 <<'PY' &
import resource, subprocess, sys
ps = [subprocess.Popen(["py-spy", "record", "--nonblocking", "--rate", "12", "-d", "12", "-f", "raw", "-o", f"/tmp/pyspy.{p}", "--pid", p], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in sys.argv[1:]]
for p in ps:
    p.wait()
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"py-spy record x{len(ps)} at 12 Hz for 12 s: {100 * (r.ru_utime + r.ru_stime) / 12:.3f}% of a core")
PY
PYSPY=$!
a1=$(ticks $S1); b1=$(ticks $S2); t1=$(date +%s.%N)
sleep 12
a2=$(ticks $S1); b2=$(ticks $S2); t2=$(date +%s.%N)
wait $PYSPY
if command -v tmux >/dev/null; then
    # `top` beside them: its panel's line per GPU process.
    tmux new-session -d -s gtop -x 200 -y 50 "$G top"
    sleep 8
    tmux capture-pane -p -t gtop >"$o/top.txt"
    tmux kill-session -t gtop
else
    echo "no tmux on this machine" >"$o/top.txt"
fi
curl -s 127.0.0.1:9400/metrics >"$o/metrics.txt"
curl -s 127.0.0.1:9400/api/v1/snapshot >"$o/snapshot.json"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$o/apps.csv"
hz=$(getconf CLK_TCK)
python3 -c "w=$t2-$t1; print(f'serve CPU over {w:.1f} s: with stacks {100*($a2-$a1)/$hz/w:.3f}% of a core, --no-stacks {100*($b2-$b1)/$hz/w:.3f}%')" >"$o/cost.txt"
wait $P1 $P2 $R
kill -TERM $S1 $S2; wait $S1 $S2; kill $SMI
"$G" diagnose --format json "$o/served.db" >"$o/served.json" 2>&1
"$G" diagnose "$o/served.db" >"$o/served.txt" 2>&1
"$G" diagnose --format json "$o/recorded.db" >"$o/recorded.json" 2>&1
python3 - "$o" "$P1" "$P2" >"$o/summary.txt" <<'EOF'
import json, sys, re
o, p1, p2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for name, pid in (("python", p1), ("gpu_bound", p2)):
    t = json.load(open(f"{o}/{name}.truth.json"))
    print(f"{name} pid {pid}: truth mechanism {t['mech_s']:.1f} s of {t['loop_s']:.1f} s loop = {100*t['mech_s']/t['loop_s']:.1f}%, {t['steps']} steps")
    tot = {}
    for l in open(f"{o}/metrics.txt"):
        m = re.match(r'gpulse_process_main_thread_seconds_total\{(.*)\} (\S+)', l)
        if m and f'pid="{pid}"' in m.group(1):
            st = re.search(r'state="([^"]+)"', m.group(1)).group(1)
            tot[st] = float(m.group(2))
    s = sum(tot.values()) or 1
    print("  /metrics:", {k: f"{100*v/s:.1f}%" for k, v in sorted(tot.items(), key=lambda x: -x[1])}, f"over {s:.1f} s")
    snap = json.load(open(f"{o}/snapshot.json"))
    for g in snap["gpus"]:
        for p in g["processes"]:
            if p["pid"] == pid:
                print("  /api:", g["index"], g["util_gpu_pct"], p["main_thread"])
    for db in ("served", "recorded"):
        d = json.load(open(f"{o}/{db}.json"))
        for st in d.get("stacks", []):
            if st["pid"] == pid:
                print(f"  {db}.db: {st['samples']} samples at {st['rate_hz']} Hz over {st['span_s']} s:",
                      [(x["state"], round(100*x["share"], 1), x["sites"][0]["site"] if x["sites"] else "") for x in st["states"][:3]])
smi = [l.split(", ") for l in open(f"{o}/smi.csv") if l.count(",") >= 1]
u = [float(x[1].split()[0]) for x in smi if x[1].split()[0].isdigit()]
print(f"nvidia-smi utilization.gpu mean {sum(u)/max(len(u),1):.0f}% over {len(u)} reads")
print(open(f"{o}/cost.txt").read().strip())
print(open(f"{o}/pyspy_cost.txt").read().strip())
print("serve stderr:", open(f"{o}/serve.err").read().strip().replace("\n", " | "))
print("record stderr:", open(f"{o}/record.err").read().strip().replace("\n", " | "))
EOF
cat "$o/summary.txt"
rm -f "$o"/*.db-*
