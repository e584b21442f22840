"""A PyTorch Lightning callback that marks steps, the wait for each batch, validation and
checkpoints for gpulse."""

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback

import time

from . import _events, mark, step


class GpulseCallback(Callback):
    """``Trainer(callbacks=[gpulse.LightningCallback()])``.

    Lightning fetches the next batch between one batch's end and the next one's start (and, at
    an epoch's start, between ``on_train_epoch_start`` and the first batch, where the DataLoader
    starts its workers): that gap is marked as the wait for data. Validation and checkpoint
    saving fall in the same gaps; they are marked as phases and not counted as waits.
    """

    def __init__(self):
        super().__init__()
        self._ready_ns = 0  # when the loop was free to fetch its next batch; 0 while not
        self._val_start_ns = 0
        self._ckpt_start_ns = 0

    def _checkpoint_done(self, now_ns):
        if self._ckpt_start_ns:
            _events.phase_done("checkpoint", self._ckpt_start_ns, now_ns)
            self._ckpt_start_ns = 0

    def on_train_epoch_start(self, trainer, pl_module):
        now = time.time_ns()
        self._checkpoint_done(now)
        mark("epoch_start", epoch=trainer.current_epoch)
        self._ready_ns = time.time_ns()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.time_ns()
        self._checkpoint_done(now)
        if self._ready_ns:
            _events.data_wait(self._ready_ns, now - self._ready_ns)
        self._ready_ns = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step()
        self._ready_ns = time.time_ns()

    def on_validation_start(self, trainer, pl_module):
        now = time.time_ns()
        self._checkpoint_done(now)
        self._val_start_ns = now
        self._ready_ns = 0

    def on_validation_end(self, trainer, pl_module):
        now = time.time_ns()
        if self._val_start_ns:
            _events.phase_done("eval", self._val_start_ns, now)
            self._val_start_ns = 0
        self._ready_ns = now

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        # Called before the file is written: the phase ends when the loop resumes.
        mark("checkpoint", epoch=trainer.current_epoch, global_step=trainer.global_step)
        self._ckpt_start_ns = time.time_ns()
        self._ready_ns = 0
