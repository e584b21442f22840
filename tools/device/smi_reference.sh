#!/usr/bin/env bash
# Captures nvidia-smi's exact query-mode behaviour on a GPU machine, as reference for gpulse's golden tests.
# Usage: OUT=dir tools/device/smi_reference.sh
set -u
o=${OUT:-/tmp/smi-ref}; mkdir -p "$o"
F=timestamp,driver_version,count,name,index,uuid,pci.bus_id,persistence_mode,pstate,compute_mode,fan.speed,utilization.gpu,utilization.memory,memory.total,memory.used,memory.free,memory.reserved,temperature.gpu,temperature.memory,power.draw,power.limit,enforced.power.limit,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,clocks_event_reasons.active,clocks_event_reasons.supported,clocks_event_reasons.gpu_idle,clocks_event_reasons.applications_clocks_setting,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.sync_boost,pcie.link.gen.current,pcie.link.width.current,ecc.errors.uncorrected.volatile.total,gpu_name,gpu_uuid,gpu_bus_id,clocks_throttle_reasons.active,clocks.gr,clocks.current.memory,clocks.max.memory,ecc.mode.current,pcie.link.gen.max,power.draw.instant,power.draw.average
{
  for fmt in csv csv,noheader csv,nounits csv,noheader,nounits; do
    echo "### --format=$fmt"; nvidia-smi --query-gpu=$F --format=$fmt; echo "rc=$?"
  done
  echo "### unknown field"; nvidia-smi --query-gpu=timestamp,foo --format=csv; echo "rc=$?"
  echo "### unknown app field"; nvidia-smi --query-compute-apps=pid,foo --format=csv; echo "rc=$?"
  echo "### no format"; nvidia-smi --query-gpu=index; echo "rc=$?"
  echo "### bad format"; nvidia-smi --query-gpu=index --format=xml; echo "rc=$?"
  echo "### -i 5"; nvidia-smi --query-gpu=index -i 5 --format=csv; echo "rc=$?"
  echo "### -i bogus"; nvidia-smi --query-gpu=index -i GPU-bogus --format=csv; echo "rc=$?"
  echo "### -i uuid"; nvidia-smi --query-gpu=index -i $(nvidia-smi --query-gpu=uuid --format=csv,noheader) --format=csv; echo "rc=$?"
  echo "### -i busid"; nvidia-smi --query-gpu=index -i 00000000:00:06.0 --format=csv; echo "rc=$?"
  echo "### apps empty"; nvidia-smi --query-compute-apps=timestamp,gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_memory --format=csv; echo "rc=$?"
  echo "### apps empty noheader"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; echo "rc=$?"
  echo "### empty field list"; nvidia-smi --query-gpu= --format=csv; echo "rc=$?"
  echo "### spaces"; nvidia-smi --query-gpu="index, name" --format=csv; echo "rc=$?"
  echo "### dup"; nvidia-smi --query-gpu=index,index --format=csv; echo "rc=$?"
  echo "### case"; nvidia-smi --query-gpu=INDEX --format=csv; echo "rc=$?"
  echo "### -f"; nvidia-smi --query-gpu=index,name --format=csv -f "$o/f.csv"; echo "rc=$?"; cat "$o/f.csv"
  echo "### -l 1 (3s)"; timeout -s INT 2.5 nvidia-smi --query-gpu=timestamp,index --format=csv -l 1; echo "rc=$?"
  echo "### -lms 300 (1s)"; timeout -s INT 1 nvidia-smi --query-gpu=timestamp,index --format=csv -lms 300; echo "rc=$?"
  echo "### env TZ"; date; cat /etc/timezone 2>/dev/null; echo "TZ=${TZ:-}"
} > "$o/smi_reference.txt" 2>&1
# with a process holding memory
python3 - "$o" <<'PY' &
import sys, time, torch
x = torch.empty(3*1024**3, dtype=torch.uint8, device="cuda")
time.sleep(8)
PY
sleep 6
{
  echo "### apps busy"; nvidia-smi --query-compute-apps=timestamp,gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_memory --format=csv; echo "rc=$?"
  echo "### apps busy nounits"; nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory,name --format=csv,nounits; echo "rc=$?"
  echo "### gpu busy"; nvidia-smi --query-gpu=memory.used,memory.free,memory.reserved,memory.total --format=csv; echo "rc=$?"
} >> "$o/smi_reference.txt" 2>&1
wait
