"""A stand-in for the parts of PyTorch that `gpulse run --instrument` hooks, shaped like the real
modules (`torch.utils.data.dataloader._BaseDataLoaderIter.__next__`, and
`torch.optim.optimizer.register_optimizer_step_post_hook`). CI has no PyTorch."""

from . import optim, utils  # noqa: F401  (real torch imports both when imported)
