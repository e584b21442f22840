"""A Hugging Face ``Trainer`` callback that marks steps, evaluation and saves for gpulse."""

from transformers import TrainerCallback

from . import mark, step


class GpulseCallback(TrainerCallback):
    """``Trainer(..., callbacks=[gpulse.HFCallback()])``."""

    def on_step_end(self, args, state, control, **kwargs):
        step()

    def on_evaluate(self, args, state, control, **kwargs):
        mark("evaluate", global_step=state.global_step)

    def on_save(self, args, state, control, **kwargs):
        mark("checkpoint", global_step=state.global_step)
