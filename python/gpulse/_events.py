"""Marks sent from the training loop to `gpulse run`, without ever blocking the loop.

Marks are lines batched into datagrams on the Unix socket named in ``GPULSE_EVENTS``. A batch
leaves when it holds 64 lines or is 50 ms old. When the recorder falls behind, the kernel
refuses the datagram at once: its marks are counted as dropped, never queued. Without
``GPULSE_EVENTS`` every call returns at once.
"""

import atexit
import os
import socket
import time

ENV = "GPULSE_EVENTS"
_BATCH_LINES = 64
_BATCH_NS = 50_000_000


class _Sender:
    __slots__ = ("path", "sock", "pid", "lines", "first_ns", "sent", "dropped")

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.pid = os.getpid()
        self.lines = []
        self.first_ns = 0
        self.sent = 0
        self.dropped = 0

    def add(self, line, now_ns):
        lines = self.lines
        if not lines:
            self.first_ns = now_ns
        lines.append(line)
        if len(lines) >= _BATCH_LINES or now_ns - self.first_ns >= _BATCH_NS:
            self.flush()

    def flush(self):
        lines = self.lines
        if not lines:
            return
        self.lines = []
        try:
            self.sock.sendto(("\n".join(lines) + "\n").encode(), self.path)
            self.sent += len(lines)
        except OSError:  # the recorder is behind (EAGAIN) or gone: drop, never wait
            self.dropped += len(lines)

    def close(self):
        self.flush()
        try:
            self.sock.sendto(f"bye {self.pid} {self.sent} {self.dropped}\n".encode(), self.path)
        except OSError:
            pass
        self.sock.close()


sender = None


def _open():
    """(Re)connects from this process; a forked child starts with an empty batch of its own."""
    global sender
    if sender is not None:
        sender.sock.close()  # in a forked child, only this process's copy of the descriptor
    path = os.environ.get(ENV)
    try:
        sender = _Sender(path) if path else None
    except OSError:
        sender = None


def _close():
    s = sender
    if s is not None:
        s.close()


_open()
os.register_at_fork(after_in_child=_open)
atexit.register(_close)


def step():
    s = sender
    if s is None:
        return
    t = time.time_ns()
    s.add(f"step {s.pid} {t} {s.dropped}", t)


def data_wait(start_ns, dur_ns):
    s = sender
    if s is None:
        return
    s.add(f"wait {s.pid} {start_ns} {dur_ns}", start_ns + dur_ns)


def phase_done(name, start_ns, end_ns):
    s = sender
    if s is None:
        return
    s.add(f"phase {s.pid} {start_ns} {end_ns - start_ns} {name}", end_ns)


def mark(name, fields_json):
    s = sender
    if s is None:
        return
    t = time.time_ns()
    s.add(f"mark {s.pid} {t} {name} {fields_json}", t)
    s.flush()  # rare and worth seeing at once


def stats():
    """(sent, dropped) marks of this process so far."""
    s = sender
    return (0, 0) if s is None else (s.sent, s.dropped)
