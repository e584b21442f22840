"""A Hugging Face ``Trainer`` callback that marks steps, the wait for each batch, evaluation and
saves for gpulse."""

import time

from transformers import TrainerCallback

from . import _events, mark, step


class GpulseCallback(TrainerCallback):
    """``Trainer(..., callbacks=[gpulse.HFCallback()])``.

    ``Trainer`` fetches the batches of a step between the previous step's end and this step's
    begin (at an epoch's start, after ``on_epoch_begin``, where the DataLoader starts its
    workers): that gap is marked as the wait for data. Evaluation and saving run after a step's
    end; each is marked as a phase ending at its own callback, and the wait is counted from
    there.
    """

    def __init__(self):
        self._ready_ns = 0  # when the loop was free to fetch its next batches; 0 while not

    def on_epoch_begin(self, args, state, control, **kwargs):
        mark("epoch_start", epoch=state.epoch)
        self._ready_ns = time.time_ns()

    def on_step_begin(self, args, state, control, **kwargs):
        now = time.time_ns()
        if self._ready_ns:
            _events.data_wait(self._ready_ns, now - self._ready_ns)
        self._ready_ns = 0

    def on_step_end(self, args, state, control, **kwargs):
        step()
        self._ready_ns = time.time_ns()

    def _phase_until_now(self, name):
        now = time.time_ns()
        if self._ready_ns:
            _events.phase_done(name, self._ready_ns, now)
        self._ready_ns = now

    def on_evaluate(self, args, state, control, **kwargs):
        self._phase_until_now("eval")
        mark("evaluate", global_step=state.global_step)

    def on_save(self, args, state, control, **kwargs):
        self._phase_until_now("checkpoint")
        mark("checkpoint", global_step=state.global_step)
