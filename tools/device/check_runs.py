"""Checks `run_training.sh`'s results: gpulse's data wait against the loop's own timing, the
diagnoses, the OOM event and the forecast made before it, and gpulse's GPU samples against the
nvidia-smi log taken at the same time. usage: check_runs.py DIR GPULSE"""
import csv
import json
import sqlite3
import subprocess
import sys
import time

o, g = sys.argv[1], sys.argv[2]
print(open(f"{o}/exits.txt").read())


def diagnose(name):
    out = subprocess.run([g, "diagnose", f"{o}/{name}.db", "--format", "json"], capture_output=True, text=True)
    return json.loads(out.stdout)


def smi_vs_gpulse(name):
    rows = list(csv.reader(open(f"{o}/{name}.smi.csv")))[1:]
    smi = []
    for r in rows:
        try:
            t = time.mktime(time.strptime(r[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
            smi.append((t, float(r[1]), float(r[2])))
        except (ValueError, IndexError):
            pass
    c = sqlite3.connect(f"{o}/{name}.db")
    rec = c.execute("select t_ms/1000.0, util_gpu_pct, mem_used_kib/1024.0 from gpu_samples where gpu = 0").fetchall()
    lo, hi = rec[0][0], rec[-1][0]
    inside = [s for s in smi if lo <= s[0] <= hi]
    mean = lambda v: sum(v) / max(len(v), 1)
    print(f"  {name}: over the same {hi - lo:.0f} s: util mean nvidia-smi {mean([s[1] for s in inside]):.1f}% "
          f"vs gpulse {mean([r[1] for r in rec if r[1] is not None]):.1f}%; memory peak nvidia-smi "
          f"{max(s[2] for s in inside):.0f} MiB vs gpulse {max(r[2] for r in rec if r[2] is not None):.0f} MiB")


for name in ["dl_bound", "dl_tuned"]:
    steps = [json.loads(l) for l in open(f"{o}/steps_{name}.jsonl")]
    steps = [s for s in steps if "step" in s]
    ends = [s["t"] + s["data_s"] + s["compute_s"] for s in steps]
    truth = 100 * sum(s["data_s"] for s in steps[1:]) / (ends[-1] - ends[0])
    d = diagnose(name)
    st = d["steps"] or {}
    print(f"{name}: loop's own data wait {truth:.1f}% ({len(steps)} steps, {(len(steps) - 1) / (ends[-1] - ends[0]):.2f}/s); "
          f"gpulse {st.get('data_wait_share_pct') or float('nan'):.1f}% ({st.get('steps')} steps, {st.get('steps_per_s') or 0:.2f}/s)")
    print("  findings:", [f["id"] for f in d["findings"]])
    smi_vs_gpulse(name)
print("compare:", open(f"{o}/compare.txt").read())

c = sqlite3.connect(f"{o}/leak.db")
events = c.execute("select t_ms, kind, payload from events order by t_ms").fetchall()
oom = [e for e in events if e[1] == "cuda_oom"]
print("leak events:", [(e[1], e[0]) for e in events])
for t, kind, payload in events:
    if kind == "finding" and "time_to_oom_s" in payload:
        p = json.loads(payload)
        at = t / 1000 + p["evidence"]["time_to_oom_s"]
        gap = f"{at - oom[0][0] / 1000:+.1f} s from the real OOM" if oom else "no OOM event"
        print(f"  forecast at {t}: {p['title']}; predicts OOM {gap}")
if oom:
    print("  OOM event:", json.loads(oom[0][2])["text"][:160])
print("  leak findings:", [f["id"] for f in diagnose("leak")["findings"]])
smi_vs_gpulse("leak")
print("leak stderr tail:")
print("".join(open(f"{o}/leak.stderr").readlines()[-14:]))
print("tty typescript (escapes shown):")
print(repr(open(f"{o}/tty.typescript", errors="replace").read()[-700:]))
print("dl_bound stderr tail:")
print("".join(open(f"{o}/dl_bound.stderr").readlines()[-12:]))
