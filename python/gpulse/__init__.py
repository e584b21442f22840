"""gpulse from inside a training loop: mark steps and phases for `gpulse run`, and load
recordings into pandas.

Outside ``gpulse run`` every call returns at once and sends nothing::

    import gpulse

    for batch in loader:
        with gpulse.phase("data"):
            batch = batch.to("cuda", non_blocking=True)
        loss = model(batch).sum(); loss.backward(); opt.step()
        gpulse.step()
    gpulse.mark("checkpoint", epoch=3, path="ckpt.pt")

``gpulse run --instrument`` marks steps and the wait for each batch with no change to the
script. Callbacks for PyTorch Lightning and Hugging Face ``Trainer`` are
``gpulse.LightningCallback`` and ``gpulse.HFCallback``; each imports its library only when used.

``gpulse.load(path)`` reads a recording into pandas DataFrames. It needs pandas, which the
package does not pull in by itself: ``pip install .[pandas]`` (or ``pip install pandas``). It
refuses a recording written by a newer gpulse with ``gpulse.NewerSchemaError``.
"""

import json as _json
import time as _time

from . import _events

__all__ = [
    "step",
    "phase",
    "mark",
    "load",
    "NewerSchemaError",
    "enabled",
    "stats",
    "LightningCallback",
    "HFCallback",
]


def enabled():
    """Whether marks reach a recorder (the process runs under ``gpulse run``)."""
    return _events.sender is not None


step = _events.step
step.__doc__ = "Marks the end of one training step."


class phase:
    """``with gpulse.phase("eval"):`` marks how long a stretch of the loop took. A phase named
    ``"data"`` counts as waiting for data."""

    __slots__ = ("name", "start_ns")

    def __init__(self, name):
        self.name = str(name).replace(" ", "_").replace("\n", "_") or "phase"
        self.start_ns = 0

    def __enter__(self):
        if _events.sender is not None:
            self.start_ns = _time.time_ns()
        return self

    def __exit__(self, *exc):
        if self.start_ns:
            _events.phase_done(self.name, self.start_ns, _time.time_ns())
        return False


def mark(name, **fields):
    """Records an event, such as ``gpulse.mark("checkpoint", epoch=3)``."""
    if _events.sender is None:
        return
    name = str(name).replace(" ", "_").replace("\n", "_") or "mark"
    _events.mark(name, _json.dumps(fields, default=str, separators=(",", ":")))


def stats():
    """``(sent, dropped)``: marks this process sent, and marks dropped while the recorder was
    behind."""
    return _events.stats()


def load(path):
    """A recording as a dict of pandas DataFrames, one per table (needs pandas:
    ``pip install .[pandas]``). Raises ``gpulse.NewerSchemaError`` for a recording written by a
    newer gpulse, and ``ValueError`` for a file that is not a recording."""
    from ._load import load as _load

    return _load(path)


def __getattr__(name):
    if name == "NewerSchemaError":
        from ._load import NewerSchemaError

        return NewerSchemaError
    if name == "LightningCallback":
        from .lightning import GpulseCallback

        return GpulseCallback
    if name == "HFCallback":
        from .huggingface import GpulseCallback

        return GpulseCallback
    raise AttributeError(f"module 'gpulse' has no attribute {name!r}")
