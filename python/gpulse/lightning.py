"""A PyTorch Lightning callback that marks steps, validation and checkpoints for gpulse."""

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback

import time

from . import _events, mark, step


class GpulseCallback(Callback):
    """``Trainer(callbacks=[gpulse.LightningCallback()])``."""

    def __init__(self):
        super().__init__()
        self._val_start_ns = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step()

    def on_validation_start(self, trainer, pl_module):
        self._val_start_ns = time.time_ns()

    def on_validation_end(self, trainer, pl_module):
        if self._val_start_ns:
            _events.phase_done("eval", self._val_start_ns, time.time_ns())
            self._val_start_ns = 0

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        mark("checkpoint", epoch=trainer.current_epoch, global_step=trainer.global_step)
