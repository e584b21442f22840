#!/usr/bin/env bash
# Where gpulse's time goes on a real driver. Usage: OUT=dir tools/device/profile.sh [gpulse-binary] [seconds]
set -u
G=${1:-carry/gpulse}; S=${2:-20}; o=${OUT:-/tmp/profile}; mkdir -p "$o"
RICH=timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed
F5=timestamp,utilization.gpu,memory.used,temperature.gpu,power.draw
ms() { date +%s%N | cut -c1-13; }
cpu_s() { awk '{print ($14+$15+$16+$17)/100}' /proc/$1/stat; }
{
echo "### one-shot F5, profiled"; GPULSE_PROFILE_NVML=1 $G query --query-gpu=$F5 --format=csv,noheader,nounits
echo "### status, profiled"; GPULSE_PROFILE_NVML=1 $G status >/dev/null
echo "### loop, profiled (1.5 s at 100 ms, rich + gpm)"; GPULSE_PROFILE_NVML=1 timeout 1.5 $G query --query-gpu=$RICH,gpm.sm_active --format=csv -lms 100 >/dev/null
echo "### one-shot wall time (ms), interleaved"
for i in $(seq 15); do
  a=$(ms); nvidia-smi --query-gpu=$F5 --format=csv,noheader,nounits >/dev/null; b=$(ms)
  $G query --query-gpu=$F5 --format=csv,noheader,nounits >/dev/null; c=$(ms)
  echo "smi $((b-a)) gpulse $((c-b))"
done
echo "### strace of one gpulse one-shot"; command -v strace && strace -c -f $G query --query-gpu=$F5 --format=csv,noheader,nounits 2>&1 | head -30
} > "$o/profile.txt" 2>&1
START=$(date +%s)
nvidia-smi --query-gpu=$RICH --format=csv -lms 100 >/dev/null & A=$!
$G query --query-gpu=$RICH --format=csv -lms 100 >/dev/null & B=$!
$G query --query-gpu=$RICH,gpm.sm_active,gpm.tensor_active,gpm.dram_active --format=csv -lms 100 >/dev/null & C=$!
$G query --query-gpu=$RICH,gpm.sm_active,gpm.tensor_active,gpm.dram_active --gpm-interval 0.1 --format=csv -lms 100 >/dev/null & D=$!
$G watch -i 0.1 >/dev/null & E=$!
sleep $S
{ echo "### CPU seconds over $(( $(date +%s) - START )) s at 100 ms"
  echo "nvidia-smi rich: $(cpu_s $A)"; echo "gpulse rich: $(cpu_s $B)"; echo "gpulse rich+gpm (1 s windows): $(cpu_s $C)"
  echo "gpulse rich+gpm (0.1 s windows): $(cpu_s $D)"; echo "gpulse watch -i 0.1: $(cpu_s $E)"; } >> "$o/profile.txt"
kill $A $B $C $D $E; wait 2>/dev/null
cat "$o/profile.txt"
