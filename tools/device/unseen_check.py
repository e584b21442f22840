"""One scenario of unseen_trainings.sh: the loop's own parts beside gpulse's headline, findings,
ledger and main-thread states. usage: unseen_check.py DIR SCENARIO"""
import json
import re
import sys

o, s = sys.argv[1], sys.argv[2]
truth = [json.loads(l) for l in open(f"{o}/truth.jsonl")]
t = [x for x in truth if x["scenario"] == s][-1]
d = json.load(open(f"{o}/{s}.json"))
smi = [l.split(", ") for l in open(f"{o}/{s}.smi") if l.count(",") >= 2]
util = [float(x[1].split()[0]) for x in smi if x[1].split()[0].isdigit()]
wall = d["ledger"]["wall_s"]
print(f"truth: loop {t['loop_s']:.1f} s of gpulse's {wall:.1f} s wall, {t['steps']} steps; "
      f"nvidia-smi util mean {sum(util) / max(len(util), 1):.0f}% ({len(util)} reads)")
for k, v in sorted(t["parts"].items(), key=lambda kv: -kv[1]):
    print(f"  part {k}: {v:.2f} s = {100 * v / t['loop_s']:.1f}% of the loop, {100 * v / wall:.1f}% of the wall")
text = open(f"{o}/{s}.txt").read()
head = text.split("\n\n")[1] if "\n\n" in text else text[:300]
print("  headline:", " ".join(head.split())[:300])
for f in d["findings"][:4]:
    c = f.get("cost") or {}
    print(f"  finding {f['id']} {f['severity']} wall {c.get('wall_share')} loop {c.get('loop_share')} | {' '.join(f['title'].split())[:220]}")
    for a in f.get("advice", [])[:2]:
        print("     advice:", " ".join(a.split())[:240])
for a in d["ledger"]["accounts"][:7]:
    print(f"  ledger {a['account']} {a['seconds']:.2f} s {100 * a['share']:.1f}% | {a['label'][:150]}")
for st in d.get("stacks", [])[:3]:
    print("  stacks", st["pid"], st["role"], st["samples"], st["rate_hz"],
          [(x["state"], x["share"], x["sites"][0]["site"][:70] if x["sites"] else "") for x in st["states"][:4]])
nums = re.findall(r"(\d+)% of the wall", " ".join(head.split()))
first = d["findings"][0]["title"] if d["findings"] else ""
print("  headline % vs first title %:", nums[:1], re.findall(r"(\d+)% of the wall", first)[:1])
