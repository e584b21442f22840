#!/usr/bin/env bash
# `gpulse serve` on a GPU machine under a light training-like load: its /metrics beside
# nvidia-smi at the same moment (5 times), the answer time of /metrics, the API and the stream,
# and its CPU cost beside `gpulse record` at the same interval, both running side by side for 40 s
# while a scraper asks every 5 s.
# Usage: OUT=dir tools/device/verify_serve.sh [gpulse-binary]; writes serve.txt and metrics_*.txt.
set -u
G=$(realpath "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify-serve}; mkdir -p "$o"
w=$(mktemp -d)
export GPULSE_TOKEN=serve-check-token-0123456789
SMI=index,uuid,pci.bus_id,name,driver_version,clocks.sm,clocks.mem,temperature.gpu,temperature.memory,power.draw,utilization.gpu,utilization.memory,memory.used,memory.free,memory.reserved,utilization.encoder,utilization.decoder
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
{
python3 tools/device/load.py 50 0 > "$w/load.jsonl" 2>&1 &
load=$!
"$G" serve --listen 127.0.0.1:9400 --interval 1s --record "$w/serve.db" 2>"$w/serve.err" &
srv=$!
"$G" record --interval 1s --duration 60s -o "$w/record.db" 2>"$w/record.err" &
rec=$!
for i in $(seq 100); do curl -sf localhost:9400/ready >/dev/null && break; sleep 0.1; done
echo "### ready after $i tries"
sleep 3
echo "### /metrics beside nvidia-smi at the same moment"
for i in 1 2 3 4 5; do
  curl -s localhost:9400/metrics > "$o/metrics_$i.txt" & c=$!
  nvidia-smi --query-gpu=$SMI --format=csv,nounits > "$o/smi_$i.csv"
  wait $c
  sleep 1
done
python3 - "$o" <<'PY'
import csv, re, sys, glob
o = sys.argv[1]
pairs = [("DCGM_FI_DEV_SM_CLOCK", "clocks.current.sm [MHz]", 60), ("DCGM_FI_DEV_MEM_CLOCK", "clocks.current.memory [MHz]", 0),
         ("DCGM_FI_DEV_GPU_TEMP", "temperature.gpu", 2), ("DCGM_FI_DEV_MEMORY_TEMP", "temperature.memory", 2),
         ("DCGM_FI_DEV_POWER_USAGE", "power.draw [W]", 60), ("DCGM_FI_DEV_GPU_UTIL", "utilization.gpu [%]", 30),
         ("DCGM_FI_DEV_MEM_COPY_UTIL", "utilization.memory [%]", 30), ("DCGM_FI_DEV_FB_USED", "memory.used [MiB]", 64),
         ("DCGM_FI_DEV_FB_FREE", "memory.free [MiB]", 64), ("DCGM_FI_DEV_FB_RESERVED", "memory.reserved [MiB]", 0),
         ("DCGM_FI_DEV_ENC_UTIL", "utilization.encoder [%]", 0), ("DCGM_FI_DEV_DEC_UTIL", "utilization.decoder [%]", 0)]
for i in range(1, 6):
    text = open(f"{o}/metrics_{i}.txt").read()
    rows = list(csv.DictReader(open(f"{o}/smi_{i}.csv"), skipinitialspace=True))
    for row in rows:
        gpu = row["index"]
        print(f"-- sample {i}, GPU {gpu} ({row['name']}, {row['uuid']}, {row['pci.bus_id']}, driver {row['driver_version']})")
        lab = re.search(rf'DCGM_FI_DEV_SM_CLOCK\{{(gpu="{gpu}"[^}}]*)\}}', text)
        print("   labels:", lab.group(1) if lab else "NONE")
        for name, field, tol in pairs:
            m = re.search(rf'^{name}\{{gpu="{gpu}"[^}}]*\}} (\S+)$', text, re.M)
            mine = m.group(1) if m else "absent"
            theirs = row.get(field, "?").strip()
            try:
                ok = abs(float(mine) - float(theirs)) <= tol
            except ValueError:
                ok = mine == "absent" and theirs.startswith("[")
            print(f"   {name:32} gpulse {mine:>14}  nvidia-smi {field} {theirs:>10}  {'ok' if ok else 'DIFFERS'}")
PY
echo "### every series name in the exposition"
grep -v '^#' "$o/metrics_5.txt" | sed 's/[{ ].*//' | sort | uniq -c
echo "### /metrics answer time, 200 requests (seconds)"
for i in $(seq 200); do curl -s -o /dev/null -w '%{time_total}\n' localhost:9400/metrics; done | sort -n | awk '{a[NR]=$1} END {print "median", a[int(NR/2)], "p99", a[int(NR*0.99)]}'
echo "### API"
curl -s -o /dev/null -w 'snapshot without token: %{http_code}\n' localhost:9400/api/v1/snapshot
curl -s -H "Authorization: Bearer $GPULSE_TOKEN" localhost:9400/api/v1/snapshot | head -c 600; echo
timeout 3 curl -sN -H "Authorization: Bearer $GPULSE_TOKEN" localhost:9400/api/v1/stream | grep -c '^data:' | sed 's/^/stream frames in 3 s: /'
echo "### CPU over 40 s, side by side at 1 s (serve scraped every 5 s)"
s0=$(ticks $srv); r0=$(ticks $rec); t0=$(date +%s%N)
for i in $(seq 8); do curl -s -o /dev/null localhost:9400/metrics; sleep 5; done
s1=$(ticks $srv); r1=$(ticks $rec); t1=$(date +%s%N)
hz=$(getconf CLK_TCK)
python3 -c "import sys; s,r,t,hz=float(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]),float(sys.argv[4]); print(f'serve {100*s/hz/t:.3f}% of a core, record {100*r/hz/t:.3f}% of a core, serve - record {100*(s-r)/hz/t:+.3f} points over {t:.1f} s')" $((s1-s0)) $((r1-r0)) "$(( (t1 - t0) / 1000000 ))e-3" $hz
kill -INT $srv; wait $srv; echo "serve exit $?"; kill -INT $rec 2>/dev/null; wait $rec
kill $load 2>/dev/null; wait $load 2>/dev/null
cat "$w/serve.err"
echo "### the recording serve kept"
"$G" diagnose "$w/serve.db" | head -8
} > "$o/serve.txt" 2>&1
cat "$o/serve.txt" | head -80
