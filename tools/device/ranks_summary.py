"""What verify_ranks.sh and verify_launchers.sh print of one run: nvidia-smi's GPU-Util, each
rank's own timing (TRUTH.RANK) or a loop's (TRUTH.json), gpulse's rows, headline, first
findings and sampled processes.
Usage: python3 ranks_summary.py DIAGNOSIS.json TRUTH NRANKS SMI"""
import json, os, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[3])
smi = [l.split(", ") for l in open(sys.argv[4]) if l.count(",") >= 2]
util = [float(x[1].split()[0]) for x in smi if x[1].split()[0].isdigit()]
print(f"nvidia-smi util mean {sum(util)/max(len(util),1):.0f}% over {len(util)} reads")
for r in range(n):
    p = f"{sys.argv[2]}.{r}"
    if os.path.exists(p):
        t = json.load(open(p)); L = t["loop_s"]
        print(f"truth rank {r} pid {t['pid']}: loop {L:.1f} s, collectives {t['collective_s']/L:.1%}, data {t['data_s']/L:.1%}, extra {t['extra_s']/L:.1%}")
if os.path.exists(sys.argv[2] + ".json"):
    t = json.load(open(sys.argv[2] + ".json"))
    print(f"truth: mechanism {t['mech_s']:.1f} s of {t['loop_s']:.1f} s loop = {t['mech_s']/t['loop_s']:.1%}, pid {t['pid']}")
for r in d.get("ranks", []):
    print("  row", {k: r.get(k) for k in ("rank", "pid", "gpu", "steps_per_s", "data_wait_share", "peer_wait_share", "busiest", "busiest_share", "busiest_site")})
print("  summary:", d.get("summary"))
for f in d["findings"][:3]:
    print("  finding", f["id"], f["severity"], "|", f["title"][:220], "| cost", f.get("cost", {}).get("loop_share"))
for s in d.get("stacks", [])[:5]:
    print("  stacks", s["pid"], s["role"], (s.get("rank") or {}).get("rank"), s["samples"], s["rate_hz"], [(x["state"], x["share"], x["sites"][0]["site"] if x["sites"] else "") for x in s["states"][:3]])
