#!/usr/bin/env bash
# Verifies gpulse against nvidia-smi on a GPU machine.
# Usage: OUT=dir tools/device/verify.sh [gpulse-binary] [test-binary]
# The test binary is `cargo test --release --no-run`'s tests-* executable; its ignored hardware
# tests run once idle and once under load.
# Writes verify.txt (comparisons), trace.csv (a gpulse query trace through the load phases) and
# cpu.txt (CPU cost side by side) under $OUT.
set -u
G=${1:-carry/gpulse}; T=${2:-carry/gpulse-tests}; o=${OUT:-/tmp/verify}; mkdir -p "$o"
# gpustat and nvitop from carried wheels (the GPU machine has no network), for side-by-side figures.
PYC=/tmp/pyclients
[ -d carry/wheels ] && python3 -m pip install -q --no-index --find-links carry/wheels --target $PYC gpustat nvitop >/dev/null 2>&1
export PYTHONPATH=$PYC${PYTHONPATH:+:$PYTHONPATH}
hw_tests() { [ -x "$T" ] && GPULSE_BIN=$G "$T" --ignored --test-threads 1 hardware 2>&1 | grep -E "^test |test result|panicked|left|right"; }
RICH=timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed
ALL=timestamp,driver_version,count,name,index,uuid,pci.bus_id,persistence_mode,pstate,compute_mode,fan.speed,utilization.gpu,utilization.memory,memory.total,memory.used,memory.free,memory.reserved,temperature.gpu,temperature.memory,power.draw,power.limit,enforced.power.limit,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,clocks_event_reasons.active,clocks_event_reasons.supported,clocks_event_reasons.gpu_idle,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,pcie.link.gen.current,pcie.link.width.current,ecc.errors.uncorrected.volatile.total,ecc.mode.current,clocks.gr,power.draw.average
GPM=timestamp,utilization.gpu,gpm.sm_active,gpm.sm_occupancy,gpm.tensor_active,gpm.dram_active,gpm.fp16_active,gpm.pcie.tx,gpm.pcie.rx,power.draw,clocks.sm,clocks_event_reasons.active
ms() { date +%s%N | cut -c1-13; }
cpu_s() { awk '{print ($14+$15+$16+$17)/100}' /proc/$1/stat; }
{
echo "### idle: rich fields, side by side (nvidia-smi first)"
for i in 1 2 3; do nvidia-smi --query-gpu=$RICH --format=csv; $G query --query-gpu=$RICH --format=csv; done
echo "### idle: all fields, every format"
for f in csv csv,noheader,nounits; do nvidia-smi --query-gpu=$ALL --format=$f; $G --query-gpu=$ALL --format=$f; done
echo "### hardware tests, idle"; hw_tests
echo "### utilization buffer over 1.2 s"; $G status --json --wait 1.2 | python3 -c "import json,sys; g=json.load(sys.stdin)['gpus'][0]; print(len(g['util_gpu_samples']), 'buffered readings; GPM window', g['gpm'] and round(g['gpm']['interval_ms']), 'ms')"
echo "### memory rounding: raw bytes, then both tools"
$G status --json | grep -E '"memory_(total|used|free|reserved)_bytes"'
nvidia-smi --query-gpu=memory.total,memory.used,memory.free,memory.reserved --format=csv,noheader
$G --query-gpu=memory.total,memory.used,memory.free,memory.reserved --format=csv,noheader
echo "### unknown field: stdout only (stderr dropped)"
nvidia-smi --query-gpu=foo --format=csv 2>/dev/null; echo "rc=$?"
echo "### unknown field: stderr only (stdout dropped)"
nvidia-smi --query-gpu=foo --format=csv 2>&1 >/dev/null; echo "rc=$?"
nvidia-smi --query-gpu=index -i 7 --format=csv 2>/dev/null; echo "no-device stdout rc=$?"
nvidia-smi --query-gpu=index --format=bogus 2>/dev/null; echo "bad-format stdout rc=$?"
echo "### one-shot wall time, 20 runs each, interleaved (ms)"
F5=timestamp,utilization.gpu,memory.used,temperature.gpu,power.draw
for i in $(seq 20); do
  a=$(ms); nvidia-smi --query-gpu=$F5 --format=csv,noheader,nounits >/dev/null; b=$(ms)
  $G query --query-gpu=$F5 --format=csv,noheader,nounits >/dev/null; c=$(ms)
  echo "smi $((b-a)) gpulse $((c-b))"
done
echo "### status views, one shot (ms): gpustat, nvitop -1, gpulse status --wait 0.1, plain nvidia-smi"
for i in $(seq 8); do
  a=$(ms); python3 -m gpustat >/dev/null 2>&1; b=$(ms); python3 -m nvitop -1 >/dev/null 2>&1; c=$(ms)
  $G status --wait 0.1 >/dev/null; d=$(ms); nvidia-smi >/dev/null; e=$(ms)
  echo "gpustat $((b-a)) nvitop $((c-b)) gpulse $((d-c)) nvidia-smi $((e-d))"
done
} > "$o/verify.txt" 2>&1

# Load phases, with both tools polling at 100 ms for 60 s side by side, and a gpulse trace.
python3 tools/device/load.py 25 15 > "$o/phases.jsonl" 2>"$o/load.err" &
LOAD=$!
sleep 1
START=$(date +%s)
nvidia-smi --query-gpu=$RICH --format=csv -lms 100 > /dev/null & SMI=$!
$G query --query-gpu=$RICH,gpm.sm_active,gpm.tensor_active,gpm.dram_active --format=csv -lms 100 > /dev/null & GP=$!
$G query --query-gpu=$RICH --format=csv -lms 100 > /dev/null & GR=$!
$G watch -i 0.1 > /dev/null & GW=$!
python3 -m gpustat -i 0.1 > /dev/null 2>&1 & GS=$!
$G query --query-gpu=$GPM --format=csv -lms 500 > "$o/trace.csv" & TR=$!
{
sleep 12
echo "### during matmul: side by side"
nvidia-smi --query-gpu=$RICH --format=csv,noheader; $G --query-gpu=$RICH,gpm.sm_active,gpm.tensor_active --format=csv,noheader
nvidia-smi --query-compute-apps=timestamp,gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_memory --format=csv
$G --query-compute-apps=timestamp,gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_memory --format=csv
$G status
echo "### hardware tests, under load"; hw_tests
# wait for the spin phase (phases.jsonl has the load's own clock)
until grep -q '"spin"' "$o/phases.jsonl"; do sleep 0.2; done; sleep 3
echo "### during single-SM spin kernel"
nvidia-smi --query-gpu=utilization.gpu,power.draw --format=csv,noheader; $G --query-gpu=utilization.gpu,gpm.sm_active,gpm.sm_occupancy --format=csv,noheader
$G watch -i 0.5 -n 3
} >> "$o/verify.txt" 2>&1
wait $LOAD
sleep 5
echo "### idle again" >> "$o/verify.txt"; $G --query-gpu=utilization.gpu,gpm.sm_active,gpm.tensor_active --format=csv,noheader >> "$o/verify.txt" 2>&1
while [ $(( $(date +%s) - START )) -lt 60 ]; do sleep 0.2; done
{ echo "CPU seconds over $(( $(date +%s) - START )) s at 100 ms:"; echo "nvidia-smi $(cpu_s $SMI)"; echo "gpulse same fields $(cpu_s $GR)"; echo "gpulse same + 3 gpm fields $(cpu_s $GP)"; echo "gpulse watch -i 0.1 $(cpu_s $GW)"; echo "gpustat -i 0.1 $(cpu_s $GS)"; echo "gpulse trace at 500 ms $(cpu_s $TR)"; } > "$o/cpu.txt"
kill $SMI $GP $GR $GW $GS $TR
wait 2>/dev/null
cat "$o/cpu.txt"
