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
    python3 "$here/ranks_summary.py" "$o/$name.json" "$o/$name.truth" "$n" "$o/$name.smi"
}
one spawn2_loader 2 python3 "$here/spawn_train.py" "$o/spawn2_loader.truth" loader "$steps" gloo
one accel2_loader 2 $acc --num_processes 2 --multi_gpu "$here/ranks_train.py" "$o/accel2_loader.truth" loader "$steps" gloo
one accel1_python 0 $acc --num_processes 1 "$here/main_thread_workloads.py" python 10
rm -f "$o"/*.db-* "$o"/*.ckpt
