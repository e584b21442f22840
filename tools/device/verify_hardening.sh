#!/usr/bin/env bash
# `gpulse run` and `gpulse serve` against hostile and unlucky conditions on a GPU machine:
#  1. run --instrument on a real DataLoader training: every step the loop counted is recorded
#     (the marks socket hears the job's tree by kernel PID), and nothing is refused;
#  2. gpulse killed with SIGKILL in the middle of a job: the job runs to its end, its stderr
#     still arrives;
#  3. serve under a training load with --token-file: /metrics beside nvidia-smi at the same
#     moment, the Host check, the page's policy, the history, a SIGHUP reload;
#  4. /metrics p50/p99, unloaded and then with 2,000 idle connections open and a /report being
#     drawn; and the idle connections closed by the head timeout.
# Usage: OUT=dir bash tools/device/verify_hardening.sh [gpulse]   (default: carry/gpulse)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); o=${OUT:-/tmp/verify_hardening}; mkdir -p "$o"
repo=$PWD; w=$(mktemp -d)
cd "$w" || exit 1

echo "### 1. run --instrument, DataLoader with 4 workers, 25 s"
"$G" run --instrument --status line --no-report -o run.db -- \
    python3 "$repo/tools/device/train_with_workers.py" 25 4 > run.out 2> run.err
echo "exit $?"
python3 - <<'PY'
import json, sqlite3
end = [json.loads(l) for l in open("run.out") if l.startswith("{")][-1]
c = sqlite3.connect("run.db")
kinds = dict(c.execute("SELECT kind, SUM(count) FROM markers GROUP BY kind"))
events = [r[0] for r in c.execute("SELECT kind FROM events")]
print("loop's own steps:", end["steps"], " recorded step marks:", kinds.get("step"), " data waits:", kinds.get("data_wait"))
print("events:", sorted(set(events)))
print("marks refused:", "marks_refused" in events)
PY
grep -E "marks refused|gpulse: " run.err | head -5

echo "### 2. gpulse killed with SIGKILL mid-job"
cat > job.py <<'PY'
import sys, time, torch
x = torch.randn(4096, 4096, device="cuda")
for i in range(8):
    y = x @ x
    torch.cuda.synchronize()
    print(f"step {i}", file=sys.stderr, flush=True)
    time.sleep(0.5)
open("finished", "w").write("yes")
PY
"$G" run --status off --no-report -o kill.db -- python3 job.py 2> kill.err &
g=$!
for i in $(seq 200); do grep -q "step 1" kill.err 2>/dev/null && break; sleep 0.1; done
kill -9 $g
for i in $(seq 300); do [ -e finished ] && break; sleep 0.1; done
sleep 0.5
echo "job finished after gpulse was killed: $(cat finished 2>/dev/null || echo no)"
echo "stderr lines that arrived: $(grep -c '^step' kill.err) of 8"

echo "### 3. serve with a token file, under load"
umask 077; python3 -c "import secrets; print(secrets.token_hex(16))" > token; umask 022
python3 "$repo/tools/device/load.py" 40 0 > load.out 2>&1 &
load=$!
"$G" serve --listen 127.0.0.1:9400 --token-file token --record serve.db 2> serve.err &
srv=$!
for i in $(seq 100); do curl -sf localhost:9400/ready >/dev/null && break; sleep 0.1; done
sleep 4
T=$(cat token)
curl -s localhost:9400/metrics > metrics.txt & c=$!
nvidia-smi --query-gpu=index,utilization.gpu,memory.used,power.draw,temperature.gpu,clocks.sm --format=csv,noheader,nounits > smi.csv
wait $c
python3 - <<'PY'
import re
text = open("metrics.txt").read()
for row in open("smi.csv"):
    gpu, util, mem, power, temp, sm = [x.strip() for x in row.split(",")]
    def m(name):
        r = re.search(rf'^{name}{{gpu="{gpu}"[^}}]*}} (\S+)$', text, re.M)
        return r.group(1) if r else "absent"
    print(f"GPU {gpu}: util gpulse {m('DCGM_FI_DEV_GPU_UTIL')} smi {util}; FB used {m('DCGM_FI_DEV_FB_USED')} smi {mem}; "
          f"power {m('DCGM_FI_DEV_POWER_USAGE')} smi {power}; temp {m('DCGM_FI_DEV_GPU_TEMP')} smi {temp}; SM clock {m('DCGM_FI_DEV_SM_CLOCK')} smi {sm}")
PY
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
echo "bearer, lowercase scheme: $(code -H "Authorization: bearer $T" localhost:9400/api/v1/snapshot)"
echo "a rebound name (Host: evil.example): $(code -H "Host: evil.example:9400" -H "Authorization: Bearer $T" localhost:9400/api/v1/snapshot)"
echo "no token: $(code localhost:9400/api/v1/snapshot)"
curl -s -D page.head -o page.html -H "Authorization: Bearer $T" localhost:9400/
grep -i -E "content-security-policy|x-frame|referrer" page.head
echo "history frames: $(curl -s -H "Authorization: Bearer $T" localhost:9400/api/v1/history | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["frames"]))')"
python3 -c "import secrets; print(secrets.token_hex(16))" > token.new; chmod 600 token.new; mv token.new token
kill -HUP $srv; sleep 1
echo "after SIGHUP: old token $(code -H "Authorization: Bearer $T" localhost:9400/api/v1/snapshot), new token $(code -H "Authorization: Bearer $(cat token)" localhost:9400/api/v1/snapshot)"

echo "### 4. /metrics answer time (s): unloaded, then beside 2,000 idle connections and a report being drawn"
lat() { for i in $(seq 300); do curl -s -o /dev/null -w '%{time_total}\n' localhost:9400/metrics; done | sort -n | awk '{a[NR]=$1} END {printf "p50 %.4f p99 %.4f\n", a[int(NR/2)], a[int(NR*0.99)]}'; }
echo "unloaded: $(lat)"
python3 - > idle.out <<'PY' &
import socket, time
held = []
for _ in range(2000):
    s = socket.create_connection(("127.0.0.1", 9400)); held.append(s)
print("opened", len(held), flush=True)
def closed():
    n = 0
    for s in held:
        s.settimeout(0.01)
        try:
            n += s.recv(1) == b""
        except (socket.timeout, BlockingIOError):
            pass
        except OSError:
            n += 1
    return n
time.sleep(8)
print("closed by the server after 8 s:", closed(), flush=True)
time.sleep(5)
print("closed by the server after 13 s:", closed(), flush=True)
PY
idle=$!
sleep 2
( for _ in 1 2 3; do curl -s -o /dev/null -H "Authorization: Bearer $(cat token)" localhost:9400/report; done ) &
echo "beside idle connections and reports: $(lat)"
wait $idle
cat idle.out
kill $srv $load 2>/dev/null; wait 2>/dev/null
grep -v "^$" serve.err | head -8
cp run.err kill.err serve.err metrics.txt smi.csv page.head "$o/" 2>/dev/null
