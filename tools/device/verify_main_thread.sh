#!/usr/bin/env bash
# The main thread on a real H200: each host-side mechanism of main_thread_workloads.py under
# `gpulse run`, beside nvidia-smi sampled at the same moments, and the loop's own timing of the
# mechanism (the ground truth for the account gpulse gives it). Writes per mechanism the
# diagnosis (JSON and text), the truth and nvidia-smi's log under $OUT.
# Usage: OUT=dir bash tools/device/verify_main_thread.sh [gpulse] [seconds] [mech...]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); secs=${2:-15}; shift 2 2>/dev/null || shift $#
mechs=${*:-python numpy sync sleep network disk ipc gil lock optimizer recompile gpu_bound}
o=${OUT:-/tmp/verify_main_thread}; mkdir -p "$o"
export PYTHONPATH=$PWD/python
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null | sed 's/^/ptrace_scope /'
for m in $mechs; do
    echo "== $m"
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 >"$o/$m.smi" &
    smi=$!
    TRUTH="$o/$m.truth.json" "$G" run --status off --no-report -o "$o/$m.db" -- \
        python3 tools/device/main_thread_workloads.py "$m" "$secs" >"$o/$m.out" 2>&1
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
    "$G" diagnose "$o/$m.db" >"$o/$m.txt" 2>&1
    "$G" diagnose --format json "$o/$m.db" >"$o/$m.json" 2>&1
    python3 - "$o/$m.json" "$o/$m.truth.json" "$o/$m.smi" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
smi = [l.split(", ") for l in open(sys.argv[3]) if l.count(",") >= 2]
util = [float(x[1].split()[0]) for x in smi if x[1].split()[0].isdigit()]
wall = d["ledger"]["wall_s"]
acc = [(a["account"], a["seconds"], round(100 * a["share"], 1), a["label"]) for a in d["ledger"]["accounts"] if a["account"].startswith("main_thread") or a["account"] in ("host_side", "unexplained", "gpu_work")]
print(f"truth: {t['mech_s']:.1f} s of {t['loop_s']:.1f} s loop in the mechanism ({100*t['mech_s']/wall:.1f}% of the {wall:.1f} s wall), {t['steps']} steps")
pr = t.get("profile") or {}
if pr: print(f"CUPTI over {pr['steps']} steps: kernels {100*pr['kernel_s']/pr['wall_s']:.1f}% and copies {100*pr['copy_s']/pr['wall_s']:.1f}% of their {pr['wall_s']:.2f} s")
print(f"nvidia-smi util mean {sum(util)/max(len(util),1):.0f}% over {len(util)} reads")
for a in acc: print("  ledger", a)
for f in d["findings"][:3]: print("  finding", f["id"], f["severity"], "|", f["title"][:200])
for s in d.get("stacks", [])[:2]:
    print("  stacks", s["pid"], s["role"], s["samples"], s["rate_hz"], [(x["state"], x["share"], x["sites"][0]["site"] if x["sites"] else "") for x in s["states"][:4]])
EOF
done
rm -f "$o"/*.db-*
