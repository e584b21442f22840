#!/usr/bin/env bash
# `gpulse serve --web-config` on a GPU machine: /metrics over TLS with basic auth beside
# nvidia-smi at the same moment, refused without credentials and over plain HTTP.
# Usage: bash tools/device/verify_tls.sh [gpulse] [dir with web.yml, cert.pem, key.pem]
# (the password is `device-check-password` for user `prometheus`; see the closing note)
set -u
G=$(readlink -f "${1:-carry/gpulse}"); d=$(readlink -f "${2:-carry/tls}")
"$G" serve --listen 127.0.0.1:9443 --web-config "$d/web.yml" 2> serve_tls.err &
srv=$!
python3 tools/device/load.py 15 0 > /dev/null 2>&1 &
load=$!
for _ in $(seq 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$d/cert.pem" -u prometheus:device-check-password https://127.0.0.1:9443/ready)" = 200 ] && break
    sleep 0.1
done
sleep 8
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
echo "no credentials: $(code --cacert "$d/cert.pem" https://127.0.0.1:9443/metrics)"
echo "a wrong password: $(code --cacert "$d/cert.pem" -u prometheus:wrong https://127.0.0.1:9443/metrics)"
echo "plain http on the TLS port: $(code http://127.0.0.1:9443/metrics)"
curl -s --cacert "$d/cert.pem" -u prometheus:device-check-password https://127.0.0.1:9443/metrics > tls_metrics.txt & c=$!
nvidia-smi --query-gpu=index,utilization.gpu,memory.used,temperature.gpu --format=csv,noheader,nounits > tls_smi.csv
wait $c
echo "right credentials over TLS: $(grep -c '^DCGM_FI' tls_metrics.txt) DCGM samples"
grep -E '^DCGM_FI_DEV_(GPU_UTIL|FB_USED|GPU_TEMP)\{' tls_metrics.txt | sed 's/{.*}//'
echo "nvidia-smi at the same moment (index, util %, memory.used MiB, temp C): $(cat tls_smi.csv)"
kill $srv $load 2>/dev/null; wait 2>/dev/null
head -5 serve_tls.err
