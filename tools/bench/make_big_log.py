"""Writes a large nvidia-smi CSV log in the rich format of the reference captures, for import
benchmarks: the real rows of rich_*.csv repeated with advancing timestamps, 8 GPUs interleaved.

Usage: python3 make_big_log.py OUT.csv MEGABYTES
"""
import datetime as dt
import glob
import os
import sys

out, megabytes = sys.argv[1], float(sys.argv[2])
here = os.path.dirname(os.path.abspath(__file__))
rows = []
for path in sorted(glob.glob(os.path.join(here, "../../tests/fixtures/h200-2026-11-29/rich_*.csv"))):
    with open(path) as f:
        header = f.readline()
        rows += [line.rstrip("\n").split(", ", 1)[1] for line in f if line.strip()]
t = dt.datetime(2026, 11, 29, 0, 0, 0)
step = dt.timedelta(milliseconds=500)
target = megabytes * 1e6
written = 0
with open(out, "w") as f:
    f.write(header)
    i = 0
    while written < target:
        stamp = t.strftime("%Y/%m/%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"
        for gpu in range(8):
            rest = rows[(i + gpu) % len(rows)].split(", ")
            rest[0] = str(gpu)
            rest[2] = rest[2][:-1] + str(gpu)
            line = f"{stamp}, {', '.join(rest)}\n"
            f.write(line)
            written += len(line)
        i += 1
        t += step
