#!/usr/bin/env bash
# The recording's hand-read columns on a real GPU: `gpulse record` beside nvidia-smi over a CUDA
# load, then the recording exported as nvidia-smi's CSV and the two compared field by field
# (fast fields by their mean over the same seconds, slow ones exactly).
# Usage: OUT=dir bash tools/device/verify_recording_columns.sh [gpulse] [seconds]
set -u
G=$(readlink -f "${1:-carry/gpulse}"); secs=${2:-15}
o=${OUT:-/tmp/verify_recording_columns}; mkdir -p "$o"
F=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total,memory.reserved,temperature.gpu,power.draw,power.limit,enforced.power.limit,clocks.sm,clocks.mem,clocks.gr,pstate,pcie.link.gen.current,pcie.link.width.current,ecc.errors.uncorrected.volatile.total,clocks_event_reasons.active
python3 - "$((secs + 6))" <<'PY' &
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        b = a @ a
    torch.cuda.synchronize()
    time.sleep(0.2)
PY
load=$!
sleep 3
nvidia-smi --query-gpu=$F --format=csv,noheader,nounits -lms 500 >"$o/smi.csv" &
smi=$!
"$G" record --interval 500ms --duration "${secs}s" -o "$o/r.db" >"$o/record.out" 2>&1
kill $smi 2>/dev/null; wait $smi 2>/dev/null; wait $load
"$G" export --format csv,noheader,nounits --query-gpu=$F "$o/r.db" >"$o/gpulse.csv" 2>"$o/export.err"
sqlite3 "$o/r.db" "SELECT * FROM gpu_state" >"$o/gpu_state.txt" 2>&1
python3 - "$o/smi.csv" "$o/gpulse.csv" "$F" <<'PY'
import sys
names = sys.argv[3].split(",")
def rows(p):
    return [[c.strip() for c in l.split(",")] for l in open(p) if l.count(",") >= len(names) - 1]
smi, gp = rows(sys.argv[1]), rows(sys.argv[2])
print(f"nvidia-smi {len(smi)} rows, gpulse {len(gp)} rows")
for i, n in enumerate(names[1:], 1):
    a = [r[i] for r in smi]; b = [r[i] for r in gp]
    def num(v):
        try: return float(v.replace("P", "").replace("0x", "")) if not v.startswith("0x") else int(v, 16)
        except ValueError: return None
    na = [x for x in map(num, a) if x is not None]; nb = [x for x in map(num, b) if x is not None]
    if n in ("clocks_event_reasons.active",):
        print(f"  {n:40s} smi {sorted(set(a))[:4]}  gpulse {sorted(set(b))[:4]}")
    elif na and nb:
        ma, mb = sum(na) / len(na), sum(nb) / len(nb)
        print(f"  {n:40s} smi mean {ma:10.1f} [{min(na):.0f}..{max(na):.0f}]  gpulse mean {mb:10.1f} [{min(nb):.0f}..{max(nb):.0f}]")
    else:
        print(f"  {n:40s} smi {sorted(set(a))[:3]}  gpulse {sorted(set(b))[:3]}")
PY
rm -f "$o"/*.db-*
