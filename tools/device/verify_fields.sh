#!/usr/bin/env bash
# Every field nvidia-smi lists in --help-query-gpu and --help-query-compute-apps, through
# nvidia-smi and gpulse at the same moment, one name at a time and all at once; the options real
# scripts pass; and nvsmi, GPUtil and Lightning's get_nvidia_gpu_stats with gpulse first on PATH
# (as `nvidia-smi`) against the real nvidia-smi.
# Usage: OUT=dir tools/device/verify_fields.sh [gpulse-binary] [wheels-dir]
# Writes fields_gpu.tsv, fields_apps.tsv (name, smi header, gpulse header, smi value, gpulse
# value, verdict), all_at_once.txt, options.txt, clients.txt.
set -u
G=$(realpath "${1:-carry/gpulse}"); WH=$(realpath "${2:-carry/wheels}"); o=${OUT:-/tmp/verify-fields}; mkdir -p "$o"
w=$(mktemp -d); mkdir -p "$w/bin"; ln -s "$G" "$w/bin/nvidia-smi"
SMI=$(command -v nvidia-smi)
# Quoted names on lines that hold nothing else: `"name" or "gpu_name"`.
names() { "$SMI" "$1" | grep -E '^"[^"]+"( or "[^"]+")*$' | grep -o '"[^"]*"' | tr -d '"'; }
# Digits become 9 and hex digits after 0x become f: what a live value's shape is.
shape() { sed -E 's/0x[0-9A-Fa-f]+/0xf/g; s/[0-9]+/9/g'; }

# One field through both tools at once: name, smi header, gpulse header, smi value, gpulse value, verdict.
one() {
  local q=$1 n=$2
  { timeout 20 "$SMI" "--$q=$n" --format=csv; echo "rc=$?"; } >"$w/s" 2>&1 &
  { timeout 20 "$G" "--$q=$n" --format=csv; echo "rc=$?"; } >"$w/g" 2>&1 &
  wait
  local sh gh sv gv verdict
  sh=$(head -n1 "$w/s"); gh=$(head -n1 "$w/g")
  sv=$(sed '1d;$d' "$w/s" | paste -sd'|'); gv=$(sed '1d;$d' "$w/g" | paste -sd'|')
  sv="$sv $(tail -n1 "$w/s")"; gv="$gv $(tail -n1 "$w/g")"
  if [ "$sh" != "$gh" ]; then verdict=HEADER
  elif [ "$sv" = "$gv" ]; then verdict=same
  elif [ "$(echo "$sv" | shape)" = "$(echo "$gv" | shape)" ]; then verdict=shape
  else verdict=VALUE; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$sh" "$gh" "$sv" "$gv" "$verdict"
}

{
  printf 'name\tsmi_header\tgpulse_header\tsmi_value\tgpulse_value\tverdict\n'
  for n in $(names --help-query-gpu); do one query-gpu "$n"; done
} >"$o/fields_gpu.tsv"
ALL=$(names --help-query-gpu | paste -sd,)

# A process holding GPU memory, so that compute-apps rows exist.
python3 - <<'PY' >"$w/holder.log" 2>&1 &
import time, torch
x = torch.empty(3 * 1024**3, dtype=torch.uint8, device="cuda")
time.sleep(40)
PY
holder=$!
for i in $(seq 30); do "$SMI" --query-compute-apps=pid --format=csv,noheader | grep -q . && break; sleep 1; done
{
  printf 'name\tsmi_header\tgpulse_header\tsmi_value\tgpulse_value\tverdict\n'
  for n in $(names --help-query-compute-apps); do one query-compute-apps "$n"; done
} >"$o/fields_apps.tsv"
APPS=$(names --help-query-compute-apps | paste -sd,)

{
  for fmt in csv csv,noheader csv,nounits csv,noheader,nounits; do
    echo "### --query-gpu=<every name> --format=$fmt"
    { "$SMI" --query-gpu="$ALL" --format=$fmt; echo "rc=$?"; } >"$w/s" 2>&1 &
    { "$G" --query-gpu="$ALL" --format=$fmt; echo "rc=$?"; } >"$w/g" 2>&1 &
    wait
    echo "## smi"; cat "$w/s"; echo "## gpulse"; cat "$w/g"
  done
  echo "### --query-compute-apps=<every name> --format=csv"
  echo "## smi"; "$SMI" --query-compute-apps="$APPS" --format=csv; echo "rc=$?"
  echo "## gpulse"; "$G" --query-compute-apps="$APPS" --format=csv; echo "rc=$?"
} >"$o/all_at_once.txt" 2>&1

# The same command through the real nvidia-smi and through gpulse called `nvidia-smi`.
both() {
  echo "### nvidia-smi $*"
  timeout 10 "$SMI" "$@" >"$w/s" 2>&1; echo "rc=$?" >>"$w/s"
  timeout 10 "$w/bin/nvidia-smi" "$@" >"$w/g" 2>&1; echo "rc=$?" >>"$w/g"
  if cmp -s "$w/s" "$w/g"; then echo "## identical"; cat "$w/s"
  else echo "## smi"; cat "$w/s"; echo "## gpulse"; cat "$w/g"; fi
}
UUID=$("$SMI" --query-gpu=uuid --format=csv,noheader | head -n1)
BUS=$("$SMI" --query-gpu=pci.bus_id --format=csv,noheader | head -n1)
{
  both -L
  both --list-gpus
  both -L -i 0
  both --query-gpu=index,name --format=csv -i 0
  both --query-gpu=index,name --format=csv --id=0
  both --query-gpu=index,name --format=csv -i "$UUID"
  both --query-gpu=index,name --format=csv --id="$BUS"
  both --query-gpu=index,name --format=csv --id="${BUS#0000}"
  both --query-gpu=index,name --format=csv -i 0,0
  both --query-gpu=index,name --format=csv -i 7
  both --query-gpu=index,memory.used --format=noheader,csv
  both --query-gpu=index,memory.used --format=nounits,noheader,csv
  both --query-gpu=index,memory.used --format=csv,nounits,noheader
  both --query-gpu=index,memory.used --format=noheader
  both --query-gpu=index,memory.used --format=csv,noheader,noheader
  both --query-gpu=index,memory.used --format=CSV
  both --query-gpu=index --format=csv -l 0
  both --help-query-gpu
  both --help-query-compute-apps
  both --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -i 0
  both -q
  both -q -x
  both topo -m
  both dmon -c 1
  both
  echo "### -lms 300 for 1 s"
  timeout -s INT 1 "$SMI" --query-gpu=index --format=csv,noheader -lms 300; echo "rc=$?"
  timeout -s INT 1 "$w/bin/nvidia-smi" --query-gpu=index --format=csv,noheader -lms 300; echo "rc=$?"
  echo "### -l 1 -f for 2.5 s"
  timeout -s INT 2.5 "$SMI" --query-gpu=index --format=csv -l 1 -f "$w/sf.csv"; echo "rc=$?"; cat "$w/sf.csv"
  timeout -s INT 2.5 "$w/bin/nvidia-smi" --query-gpu=index --format=csv -l 1 -f "$w/gf.csv"; echo "rc=$?"; cat "$w/gf.csv"
} >"$o/options.txt" 2>&1

# Real clients: their GPU-listing calls, with the real nvidia-smi and then gpulse on PATH.
{
  python3 -m venv --system-site-packages "$w/venv" && "$w/venv/bin/python" -m pip install --quiet --no-index \
    --no-build-isolation --find-links "$WH" setuptools nvsmi==0.4.2 GPUtil==1.4.0 2>&1 | tail -n 3
  cat >"$w/clients.py" <<'PY'
import os, shutil, subprocess, sys
print("nvidia-smi is", shutil.which("nvidia-smi"), os.path.realpath(shutil.which("nvidia-smi")))
try:
    import nvsmi
    for g in nvsmi.get_gpus():
        print("nvsmi gpu", {k: g.__dict__[k] for k in sorted(g.__dict__)})
    for p in nvsmi.get_gpu_processes():
        print("nvsmi proc", p.pid, p.process_name, p.gpu_id, p.gpu_uuid, p.gpu_name, p.used_memory)
except Exception as e:
    print("nvsmi failed:", repr(e))
try:
    import GPUtil
    for g in GPUtil.getGPUs():
        print("GPUtil", g.id, g.uuid, g.load, g.memoryTotal, g.memoryUsed, g.memoryFree, g.driver, g.name, g.serial, g.display_mode, g.display_active, g.temperature)
except Exception as e:
    print("GPUtil failed:", repr(e))
# Lightning's get_nvidia_gpu_stats (lightning/pytorch/accelerators/cuda.py), for device 0.
keys = ["utilization.gpu", "memory.used", "memory.free", "utilization.memory", "fan.speed", "temperature.gpu", "temperature.memory"]
def _to_float(x):
    try:
        return float(x)
    except ValueError:
        return 0.0
try:
    r = subprocess.run([shutil.which("nvidia-smi"), f"--query-gpu={','.join(keys)}", "--format=csv,nounits,noheader", "--id=0"],
                       encoding="utf-8", capture_output=True, check=True)
    print("lightning", [_to_float(x) for x in r.stdout.strip().split(", ")], repr(r.stdout))
except Exception as e:
    print("lightning failed:", repr(e))
PY
  echo "### real nvidia-smi"; "$w/venv/bin/python" "$w/clients.py"
  echo "### gpulse as nvidia-smi"; PATH="$w/bin:$PATH" "$w/venv/bin/python" "$w/clients.py"
} >"$o/clients.txt" 2>&1
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
"$SMI" --version >>"$o/options.txt" 2>&1
awk -F'\t' 'NR>1{n[$6]++} END{for(v in n) print v, n[v]}' "$o/fields_gpu.tsv" "$o/fields_apps.tsv"
