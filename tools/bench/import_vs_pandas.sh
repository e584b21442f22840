#!/usr/bin/env bash
# gpulse import against pandas.read_csv on the same log, alternating, ROUNDS rounds; prints every
# wall time and the medians. Usage: import_vs_pandas.sh LOG.csv GPULSE PYTHON [ROUNDS]
# (PYTHON: an interpreter with pandas, and pyarrow for its engine)
set -eu
log=$1; g=$2; py=$3; rounds=${4:-5}
here=$(dirname "$0"); out=$(mktemp -d)
wall() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }
for i in $(seq "$rounds"); do
  echo "c $(wall "$py" "$here/pandas_read.py" "$log" c)" >> "$out/t"
  echo "pyarrow $(wall "$py" "$here/pandas_read.py" "$log" pyarrow)" >> "$out/t"
  rm -f "$out/x.db"
  echo "gpulse $(wall "$g" import "$log" -o "$out/x.db")" >> "$out/t"
done
"$py" - "$out/t" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    runs.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
for k in ("c", "pyarrow", "gpulse"):
    print(f"{k:8} median {med[k]:.2f} s  runs {runs[k]}  gpulse is {med[k] / med['gpulse']:.2f}x faster")
PY
rm -rf "$out"
