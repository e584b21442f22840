#!/usr/bin/env bash
# Checks the GPM readings after they moved to the model's one table, on a GPU machine, beside
# nvidia-smi: a bf16 matmul, then a single-SM spin kernel, then idle, read by `gpulse query`
# (gpm.* fields), by `gpulse record` (then exported), and by the hardware tests.
# Usage: OUT=dir tools/device/verify_gpm_table.sh [gpulse-binary] [test-binary]; writes gpm_table.txt.
set -u
G=$(realpath "${1:-carry/gpulse}"); T=${2:-carry/gpulse-tests}; o=${OUT:-/tmp/verify-gpm}; mkdir -p "$o"
w=$(mktemp -d)
GPM=timestamp,utilization.gpu,gpm.sm_active,gpm.sm_occupancy,gpm.tensor_active,gpm.hmma_active,gpm.dram_active,gpm.fp16_active,gpm.fp32_active,gpm.pcie.tx,gpm.pcie.rx,gpm.nvlink.tx,gpm.nvlink.rx
{
echo "### hardware tests (gpulse against nvidia-smi, GPM windows, the utilization buffer)"
[ -x "$T" ] && GPULSE_BIN=$G "$T" --ignored --test-threads 1 hardware 2>&1 | grep -E "^test |test result|panicked|left|right"
echo "### a bf16 matmul 12 s, a spin kernel 8 s, then idle: gpulse query every 1 s beside nvidia-smi"
python3 tools/device/load.py 12 8 > "$w/phases.jsonl" &
load=$!
$G record --interval 500ms --duration 24s -o "$w/gpm.db" 2>"$w/record.err" &
rec=$!
for i in $(seq 22); do
  printf 'smi   '; nvidia-smi --query-gpu=utilization.gpu,power.draw,clocks.sm --format=csv,noheader
  printf 'gpulse '; $G --query-gpu=$GPM --format=csv,noheader
  sleep 1
done
wait $load; wait $rec
cat "$w/phases.jsonl" "$w/record.err"
echo "### the recording's GPM windows, exported (every 4th)"
$G export "$w/gpm.db" --query-gpu=timestamp,utilization.gpu,gpm.sm_active,gpm.tensor_active,gpm.dram_active,gpm.pcie.rx --format=csv | awk 'NR==1 || NR%4==0'
echo "### the diagnosis of it"
$G diagnose "$w/gpm.db" | head -12
} > "$o/gpm_table.txt" 2>&1
cat "$o/gpm_table.txt"
