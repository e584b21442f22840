"""A main thread 40 distinct functions deep among 8 idle threads, spinning in Python for 12 s: what
one stack sample costs where every frame is another code object (BENCHMARKS.md)."""
import threading, time
def idle():
    while True: time.sleep(1)
for _ in range(7): threading.Thread(target=idle, daemon=True).start()
src = []
for i in range(40):
    body = "\n".join(f"    x{j} = {j} * 2" for j in range(30))
    nxt = f"f{i+1}()" if i < 39 else "spin()"
    src.append(f"def f{i}():\n{body}\n    {nxt}\n")
def spin():
    t = time.perf_counter()
    while time.perf_counter() - t < 12: pass
exec("\n".join(src))
f0()
