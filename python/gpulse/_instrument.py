"""``gpulse run --instrument``: times each wait for a DataLoader batch and counts optimizer
steps, with no change to the script.

Nothing is imported eagerly: an import hook patches ``torch.utils.data.dataloader`` and
``torch.optim.optimizer`` when the script itself imports them.
"""

import importlib.abc
import sys
import time

from . import _events


def _patch_dataloader(module):
    base = getattr(module, "_BaseDataLoaderIter", None)
    if base is None or getattr(base.__next__, "_gpulse", False):
        return
    inner = base.__next__

    def __next__(self):
        if _events.sender is None:
            return inner(self)
        if getattr(self, "_num_yielded", 1) == 0:
            # A fresh iterator: an epoch (or an evaluation) starts, and without
            # persistent_workers its workers start with it.
            _events.mark("loader_start", "{}")
        start = time.time_ns()
        try:
            return inner(self)
        finally:
            _events.data_wait(start, time.time_ns() - start)

    __next__._gpulse = True
    __next__.__wrapped__ = inner
    base.__next__ = __next__


def _on_step(optimizer, args, kwargs):
    _events.step()


def _patch_optimizer(module):
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None:  # every optimizer, subclasses included (PyTorch 2.0 and later)
        register(_on_step)
        return
    base = getattr(module, "Optimizer", None)
    if base is None or getattr(base.step, "_gpulse", False):
        return
    inner = base.step

    def step(self, *args, **kwargs):
        out = inner(self, *args, **kwargs)
        _events.step()
        return out

    step._gpulse = True
    base.step = step


_TARGETS = {
    "torch.utils.data.dataloader": _patch_dataloader,
    "torch.optim.optimizer": _patch_optimizer,
}


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then the patch; everything else is the real loader's."""

    def __init__(self, inner, patch):
        self._inner = inner
        self._patch = patch

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            self._patch(module)
        except Exception as e:  # never break the script over instrumentation
            sys.stderr.write(f"gpulse: could not instrument {module.__name__}: {e}\n")

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        patch = _TARGETS.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


def install():
    """Patches the modules already imported and hooks the ones still to come."""
    for name, patch in _TARGETS.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
