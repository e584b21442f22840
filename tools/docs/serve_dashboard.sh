#!/usr/bin/env bash
# Regenerates docs/serve-dashboard.png: `gpulse serve` on the stand-in NVML library with the
# three-GPU scenario, drawn by headless Chromium. Tests never write into the source tree; this does,
# when asked. Usage: tools/docs/serve_dashboard.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet --bin gpulse -p fake-nvml
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s' "$token" > "$work/token"
chmod 600 "$work/token"
GPULSE_NVML_LIB=target/release/libnvidia_ml.so \
GPULSE_FAKE_NVML_SCENARIO=tests/fixtures/scenarios/serve_three_gpus.json TZ=UTC \
    target/release/gpulse serve --listen 127.0.0.1:0 --interval 200ms --token-file "$work/token" \
    2> "$work/serve.log" &
pid=$!
addr=
for _ in $(seq 100); do
    addr=$(sed -n 's|^gpulse: serving on http://\([^/]*\).*|\1|p' "$work/serve.log" | head -1)
    [ -n "$addr" ] && break
    sleep 0.1
done
[ -n "$addr" ] || { echo "gpulse serve did not start: $(cat "$work/serve.log")" >&2; exit 1; }
sleep 3   # a few frames for the charts
chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --user-data-dir="$work/profile" --timeout=3000 --window-size=1200,1400 \
    --screenshot="$work/dashboard.png" "http://$addr/?token=$token" >/dev/null 2>&1
test -s "$work/dashboard.png"
mv "$work/dashboard.png" docs/serve-dashboard.png
echo "wrote docs/serve-dashboard.png"
