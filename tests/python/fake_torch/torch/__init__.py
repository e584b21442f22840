"""A stand-in for the parts of PyTorch that `gpulse run --instrument` hooks, shaped like the real
modules (`torch.utils.data.dataloader._BaseDataLoaderIter.__next__`, and
`torch.optim.optimizer.register_optimizer_step_post_hook`). CI has no PyTorch."""

from . import distributed, multiprocessing, optim, serialization, utils  # noqa: F401  (real torch imports them when imported)

import time as _time


class Tensor:
    """A host tensor whose copy to the GPU blocks for ``copy_s`` (as a pageable copy does), and
    returns at once with ``non_blocking=True`` (as a pinned one does)."""

    def __init__(self, copy_s=0.0, is_cuda=False):
        self.copy_s = copy_s
        self.is_cuda = is_cuda

    def to(self, device=None, *args, non_blocking=False, **kwargs):
        if str(device).startswith("cuda") and not self.is_cuda:
            if not non_blocking:
                _time.sleep(self.copy_s)
            return Tensor(self.copy_s, True)
        return self

    def cuda(self, *args, non_blocking=False, **kwargs):
        return self.to("cuda", non_blocking=non_blocking)


from .serialization import save  # noqa: E402  (real torch re-exports it too)
