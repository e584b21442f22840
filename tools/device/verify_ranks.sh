#!/usr/bin/env bash
# A distributed job seen whole, on a real GPU with real torch: torchrun with two ranks on the one
# GPU over gloo (rank 1's DataLoader slower; then rank 0 saving checkpoints), and torchrun with
# one rank over NCCL, each beside nvidia-smi. Writes the diagnoses, the ranks' own timings and
# a summary under $OUT.
# Usage: OUT=dir bash tools/device/verify_ranks.sh [gpulse] [steps]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); steps=${2:-150}
o=${OUT:-/tmp/verify_ranks}; mkdir -p "$o"
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$PWD/python
one() { # name nproc mode backend
    local name=$1 n=$2 mode=$3 backend=$4
    echo "== $name"
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 >"$o/$name.smi" &
    local smi=$!
    "$G" run --instrument --status off --no-report -o "$o/$name.db" -- python3 -m torch.distributed.run --standalone \
        --nproc_per_node="$n" "$here/ranks_train.py" "$o/$name.truth" "$mode" "$steps" "$backend" >"$o/$name.out" 2>&1
    echo "rc $?"
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >>"$o/$name.apps" 2>&1
    "$G" diagnose "$o/$name.db" >"$o/$name.txt" 2>&1
    "$G" diagnose --format json "$o/$name.db" >"$o/$name.json" 2>&1
    python3 "$here/ranks_summary.py" "$o/$name.json" "$o/$name.truth" "$n" "$o/$name.smi"
}
one gloo2_loader 2 loader gloo
one gloo2_save 2 save gloo
one nccl1 1 even nccl
rm -f "$o"/*.db-* "$o"/*.ckpt
# Start-up split by what the main thread did, on real torch.
echo "== startup"
"$G" run --status off --no-report -o "$o/startup.db" -- python3 "$here/startup_train.py" "$o/startup.truth" 8 >"$o/startup.out" 2>&1
echo "rc $?"
"$G" diagnose --format json "$o/startup.db" >"$o/startup.json" 2>&1
python3 - "$o/startup.json" "$o/startup.truth" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
print("truth:", {k: round(v, 2) for k, v in t.items()})
f = next((x for x in d["findings"] if x["id"] == "startup"), None)
print("startup:", f and f["title"])
for p in (f or {}).get("evidence", {}).get("startup_split", []):
    print("  part", p)
for a in (f or {}).get("advice", []):
    print("  advice", a[:160])
PY
rm -f "$o"/*.db-*
