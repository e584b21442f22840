#!/usr/bin/env bash
# /metrics answer times (p50, p99, and how many were not 200) of `gpulse serve`: unloaded, then
# with IDLE connections held open from another address (127.0.0.2) and a /report being drawn;
# then the same with the idle connections from the scraper's own address (127.0.0.1), where the
# per-address limit applies. Also the open-file limits the server ran with.
# Usage: IDLE=2000 bash tools/device/serve_idle_load.sh [gpulse]   (stand-in NVML: set GPULSE_NVML_LIB)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); IDLE=${IDLE:-2000}
w=$(mktemp -d); cd "$w" || exit 1
umask 077; python3 -c "import secrets; print(secrets.token_hex(16))" > token; umask 022
"$G" serve --listen 127.0.0.1:9400 --token-file token --record serve.db 2> serve.err &
srv=$!
for _ in $(seq 100); do curl -sf localhost:9400/ready >/dev/null && break; sleep 0.1; done
sleep 3
echo "open files (soft/hard) of the server: $(awk '/open files/ {print $4 "/" $5}' /proc/$srv/limits), shell: $(ulimit -Sn)/$(ulimit -Hn)"
lat() {
    for _ in $(seq 300); do curl -s -o /dev/null -w '%{http_code} %{time_total}\n' localhost:9400/metrics; done |
        sort -k2 -n | awk '$1 != 200 {bad++} {t[NR]=$2} END {printf "p50 %.2f ms, p99 %.2f ms, not 200: %d of %d\n", 1000*t[int(NR/2)], 1000*t[int(NR*0.99)], bad, NR}'
}
echo "unloaded: $(lat)"
for from in 127.0.0.2 127.0.0.1; do
    python3 - "$from" "$IDLE" > "idle_$from.out" <<'PY' &
import socket, sys, time
held = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(); s.bind((sys.argv[1], 0)); s.connect(("127.0.0.1", 9400)); held.append(s)
print("opened", len(held), flush=True)
time.sleep(6)
PY
    idle=$!
    sleep 2
    ( for _ in 1 2 3; do curl -s -o /dev/null -H "Authorization: Bearer $(cat token)" localhost:9400/report; done ) &
    rep=$!
    echo "$IDLE idle from $from, reports being drawn: $(lat)"
    wait $idle $rep
done
kill $srv; wait 2>/dev/null
