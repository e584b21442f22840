"""Cost of the Python package's calls: outside `gpulse run` (no-ops) and inside it (marks batched
onto a socket that a thread reads, as gpulse's recorder does).
usage: PYTHONPATH=python python3 tools/bench/python_marks.py"""
import os
import socket
import tempfile
import threading
import timeit

import gpulse
from gpulse import _events

N = 1_000_000


def per_call_ns(stmt):
    best = min(timeit.repeat(stmt, number=N, repeat=5, globals={"gpulse": gpulse}))
    return best / N * 1e9


os.environ.pop(_events.ENV, None)
_events._open()
PHASE = 'with gpulse.phase("data"): pass'
print(f"outside gpulse run: step() {per_call_ns('gpulse.step()'):.0f} ns, "
      f"with phase(): {per_call_ns(PHASE):.0f} ns, empty loop {per_call_ns('pass'):.0f} ns")

d = tempfile.mkdtemp()
path = os.path.join(d, "s")
rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
rx.bind(path)
rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
stop = False


def drain():
    rx.settimeout(0.2)
    while not stop:
        try:
            rx.recv(65536)
        except OSError:
            pass


t = threading.Thread(target=drain)
t.start()
os.environ[_events.ENV] = path
_events._open()
print(f"inside gpulse run: step() {per_call_ns('gpulse.step()'):.0f} ns, "
      f"with phase(): {per_call_ns(PHASE):.0f} ns; sent {gpulse.stats()[0]}, dropped {gpulse.stats()[1]}")
stop = True
t.join()
