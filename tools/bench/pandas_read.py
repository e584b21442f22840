"""What a pandas user does with an nvidia-smi log: read it and turn every column into a typed
one (numbers without their units, timestamps as datetimes).
Usage: python3 pandas_read.py LOG.csv [ENGINE]   (ENGINE: c, the default, or pyarrow)"""
import sys
import time

import pandas as pd

start = time.perf_counter()
engine = sys.argv[2] if len(sys.argv) > 2 else "c"
if engine == "pyarrow":  # pyarrow's reader does not skip the space after each comma itself
    df = pd.read_csv(sys.argv[1], engine="pyarrow")
    df.columns = [c.strip() for c in df.columns]
    for col in df.columns:
        if df[col].dtype != "int64" and df[col].dtype != "float64":
            df[col] = df[col].str.strip()
else:
    df = pd.read_csv(sys.argv[1], skipinitialspace=True)
df["timestamp"] = pd.to_datetime(df["timestamp"], format="%Y/%m/%d %H:%M:%S.%f")
for col in df.columns:
    if df[col].dtype == object and col not in ("timestamp", "name", "uuid", "pstate", "clocks_event_reasons.active"):
        df[col] = pd.to_numeric(df[col].str.split(" ", n=1).str[0], errors="coerce")
df["pstate"] = df["pstate"].str[1:].astype("int8")
if df["clocks_event_reasons.active"].dtype != "int64":  # pyarrow's reader parses 0x… itself
    df["clocks_event_reasons.active"] = df["clocks_event_reasons.active"].apply(int, base=16)
print(f"pandas {pd.__version__} ({engine}): {len(df)} rows, {time.perf_counter() - start:.2f} s", file=sys.stderr)
