#!/usr/bin/env bash
# Runs the same model four ways on 2 GPUs under `gpulse run --instrument`: correct DDP, DDP without
# set_device, uneven DDP, and nn.DataParallel. Usage: OUT=dir multi_gpu.sh [gpulse] [seconds]
set -u
G=${1:-carry/gpulse}; S=${2:-20}; o=${OUT:-/tmp/multi}; mkdir -p "$o"
export NCCL_NVLS_ENABLE=0
one() { # name, command...
  local name=$1; shift
  timeout 120 $G run --instrument --status off --interval 250ms --no-report -o "$o/$name.db" -- "$@" \
    > "$o/$name.events.jsonl" 2> "$o/$name.err"
  echo "$name exit $?" >> "$o/record.log"
}
VARIANTS=${VARIANTS:-ddp misbound uneven dataparallel}
[[ " $VARIANTS " == *" ddp "* ]] && one ddp torchrun --nproc_per_node=2 tools/device/multi_gpu_train.py ddp "$S"
[[ " $VARIANTS " == *" misbound "* ]] && one misbound torchrun --nproc_per_node=2 tools/device/multi_gpu_train.py misbound "$S"
[[ " $VARIANTS " == *" uneven "* ]] && one uneven torchrun --nproc_per_node=2 tools/device/multi_gpu_train.py uneven "$S"
[[ " $VARIANTS " == *" dataparallel "* ]] && one dataparallel python3 tools/device/multi_gpu_train.py dataparallel "$S"
{
  cat "$o/record.log"
  for n in $VARIANTS; do
    echo "=== $n"; sed -n '/── gpulse ──/,$p' "$o/$n.err" | grep -vE "^ +(- |evidence)" | cut -c1-200
    cat "$o/$n.events.jsonl"
    $G diagnose "$o/$n.db" | grep -E "^(CRITICAL|WARNING|INFO)"
    python3 - "$o/$n.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(" util by gpu:", c.execute("select gpu, round(avg(util_gpu_pct),1), max(mem_used_kib)/1024 from gpu_samples where util_gpu_pct > 0 group by gpu").fetchall())
print(" processes:", c.execute("select gpu, pid, class, max(used_mem_kib)/1024 from gpu_processes group by gpu, pid").fetchall())
PY
  done
} > "$o/multi_summary.txt" 2>&1
rm -f "$o"/*.err "$o"/*.events.jsonl "$o/record.log"
cat "$o/multi_summary.txt"
