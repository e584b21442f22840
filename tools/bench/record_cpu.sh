#!/usr/bin/env bash
# CPU cost of `gpulse record` for 8 GPUs through the stand-in NVML library, steady state.
# Usage: tools/bench/record_cpu.sh [seconds-at-1s] [seconds-at-100ms]
set -eu
cd "$(dirname "$0")/../.."
cargo build --release --quiet -p gpulse -p fake-nvml
S1=${1:-60}; S2=${2:-30}
dir=$(mktemp -d)
python3 - "$dir/sc.json" <<'PY'
import json, sys
dev = lambda i: {"name": "NVIDIA H200", "uuid": f"GPU-{i:08d}-0000-0000-0000-000000000000", "pci_bus_id": f"00000000:{0x10+i:02X}:00.0",
  "base": {"util_gpu_pct": 50, "util_mem_pct": 20, "memory_total_mib": 143771, "memory_used_mib": 40000, "memory_reserved_mib": 615,
           "temperature_gpu_c": 55, "temperature_memory_c": 48, "power_w": 500.5, "power_limit_w": 700, "clock_sm_mhz": 1980,
           "clock_mem_mhz": 3201, "pstate": 0, "clocks_event_reasons": 0, "pcie_link_gen": 5, "pcie_link_width": 16, "ecc_enabled": True,
           "ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 0, "energy_j": 1000.0, "gpm_supported": True,
           "gpm": {"sm": 45.0, "occupancy": 20.0, "any_tensor": 10.0, "dram": 15.0, "pcie_tx": 7.0, "pcie_rx": 30.0}},
  "timeline": [{"t_s": t, "util_gpu_pct": 40 + (t * 7 + i) % 50, "power_w": 400 + (t * 13 + i) % 250, "memory_used_mib": 40000 + t} for t in range(0, 600)],
  "processes": [{"pid": 1000 + i, "name": "python3", "used_memory_mib": 39000, "sm_util_pct": 45, "mem_util_pct": 20}]}
json.dump({"devices": [dev(i) for i in range(8)]}, open(sys.argv[1], "w"))
PY
export GPULSE_NVML_LIB=$PWD/target/release/libnvidia_ml.so GPULSE_FAKE_NVML_SCENARIO=$dir/sc.json
ticks=$(getconf CLK_TCK)
measure() { # interval seconds
  ./target/release/gpulse record --interval "$1" -o "$dir/r$1.db" 2>/dev/null & local pid=$!
  sleep 5  # start-up (NVML init, first GPM window) is not steady state
  local a; a=$(awk '{print $14+$15}' /proc/$pid/stat); sleep "$2"
  local b; b=$(awk '{print $14+$15}' /proc/$pid/stat); kill -INT $pid; wait $pid || true
  python3 -c "print(f'record --interval $1, 8 GPUs: {($b-$a)/$ticks:.2f} s CPU in $2 s = {100*($b-$a)/$ticks/$2:.2f}% of one core')"
  python3 -c "import sqlite3,os; c=sqlite3.connect('$dir/r$1.db'); n=c.execute('select count(*) from gpu_samples').fetchone()[0]; print(f'  {n} GPU-samples, {os.path.getsize(\"$dir/r$1.db\")/n:.1f} bytes each on disk (all tables)')"
}
measure 1s "$S1"
measure 100ms "$S2"
rm -rf "$dir"
