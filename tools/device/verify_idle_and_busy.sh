#!/usr/bin/env bash
# The diagnosis of an idle H200 and of a short busy job, beside nvidia-smi at the same moments:
# `record` of 15 s with nothing running (no loop, no roofline, no healthy), then `gpulse run` of
# a 15 s BF16 matmul job with step marks (healthy, a math-bound roofline, energy per step).
# About 45 s. Usage: OUT=dir bash tools/device/verify_idle_and_busy.sh [gpulse]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_idle}; mkdir -p "$o"
echo "== idle: nvidia-smi, then record 15 s"
nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw --format=csv,noheader
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l
"$G" record --duration 15s -o "$o/idle.db" 2>/dev/null
"$G" diagnose "$o/idle.db"
echo "== busy: run a 15 s BF16 job with step marks"
export PYTHONPATH=$PWD/python
"$G" run --status off --no-report -o "$o/busy.db" -- python3 -c "
import time, torch, gpulse
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
end = time.time() + 15
while time.time() < end:
    for _ in range(10):
        a @ a
    torch.cuda.synchronize(); gpulse.step()
" 2>&1 | sed -n '/── gpulse ──/,$p' | grep -v "^recording\|^report"
nvidia-smi --query-gpu=utilization.gpu,power.draw --format=csv,noheader
rm -f "$o"/*.db "$o"/*.db-*
