#!/usr/bin/env bash
# The launchers torchrun is not: mp.spawn with two ranks over gloo (rank 1's DataLoader slower),
# accelerate launch with two ranks the same way, and accelerate launch with one process of a
# host-bound CUDA loop; each under `gpulse run`, beside nvidia-smi, with the ranks' own timings.
# Usage: OUT=dir bash tools/device/verify_launchers.sh [gpulse] [steps]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); steps=${2:-300}
o=${OUT:-/tmp/verify_launchers}; mkdir -p "$o"
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$PWD/python
acc="accelerate launch --num_machines 1 --mixed_precision no --dynamo_backend no"
one() { # name nranks command...
    local name=$1 n=$2; shift 2
    echo "== $name"
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 >"$o/$name.smi" &
    local smi=$!
    TRUTH="$o/$name.truth.json" "$G" run --instrument --status off --no-report -o "$o/$name.db" -- "$@" >"$o/$name.out" 2>&1
    echo "rc $?"
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
    "$G" diagnose "$o/$name.db" >"$o/$name.txt" 2>&1
    "$G" diagnose --format json "$o/$name.db" >"$o/$name.json" 2>&1
    python3 - "$o/$name.json" "$o/$name.truth" "$n" "$o/$name.smi" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[3])
smi = [l.split(", ") for l in open(sys.argv[4]) if l.count(",") >= 2]
util = [float(x[1].split()[0]) for x in smi if x[1].split()[0].isdigit()]
print(f"nvidia-smi util mean {sum(util)/max(len(util),1):.0f}% over {len(util)} reads")
for r in range(n):
    p = f"{sys.argv[2]}.{r}"
    if os.path.exists(p):
        t = json.load(open(p)); L = t["loop_s"]
        print(f"truth rank {r} pid {t['pid']}: loop {L:.1f} s, collectives {t['collective_s']/L:.1%}, data {t['data_s']/L:.1%}, extra {t['extra_s']/L:.1%}")
if os.path.exists(sys.argv[2] + ".json"):
    t = json.load(open(sys.argv[2] + ".json"))
    print(f"truth: mechanism {t['mech_s']:.1f} s of {t['loop_s']:.1f} s loop = {t['mech_s']/t['loop_s']:.1%}, pid {t['pid']}")
for r in d.get("ranks", []):
    print("  row", {k: r.get(k) for k in ("rank", "pid", "gpu", "steps_per_s", "data_wait_share", "peer_wait_share", "busiest", "busiest_share", "busiest_site")})
print("  summary:", d.get("summary"))
for f in d["findings"][:3]:
    print("  finding", f["id"], f["severity"], "|", f["title"][:220], "| cost", f.get("cost", {}).get("loop_share"))
for s in d.get("stacks", [])[:5]:
    print("  stacks", s["pid"], s["role"], (s.get("rank") or {}).get("rank"), s["samples"], s["rate_hz"], [(x["state"], x["share"], x["sites"][0]["site"] if x["sites"] else "") for x in s["states"][:3]])
PY
}
#one spawn2_loader 2 python3 "$here/spawn_train.py" "$o/spawn2_loader.truth" loader "$steps" gloo
one accel2_loader 2 $acc --num_processes 2 --multi_gpu "$here/ranks_train.py" "$o/accel2_loader.truth" loader "$steps" gloo
#one accel1_python 0 $acc --num_processes 1 "$here/main_thread_workloads.py" python 10
rm -f "$o"/*.db-* "$o"/*.ckpt
