"""``gpulse run --instrument``: times each wait for a DataLoader batch, counts optimizer
steps, and times checkpoint saves and the host-to-device copies that hold the loop up, with no
change to the script.

Nothing is imported eagerly: an import hook patches ``torch.utils.data.dataloader`` and
``torch.optim.optimizer`` when the script itself imports them.
"""

import importlib.abc
import json
import sys
import time

from . import _events


def _settings(it):
    """The DataLoader's settings, as its iterator holds them, in JSON."""
    fields = {
        "num_workers": getattr(it, "_num_workers", None),
        "pin_memory": getattr(it, "_pin_memory", None),
        "persistent_workers": getattr(it, "_persistent_workers", None),
        "prefetch_factor": getattr(it, "_prefetch_factor", None),
        "batch_size": getattr(getattr(it, "_index_sampler", None), "batch_size", None),
    }
    kept = {k: v for k, v in fields.items() if isinstance(v, (bool, int))}
    return json.dumps(kept, separators=(",", ":"))


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
            # persistent_workers its workers start with it. Its settings say what
            # advice the loop already follows.
            _events.mark("loader_start", _settings(self))
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


# A copy that returns sooner than this did not hold the loop up (a pinned, non_blocking copy
# returns at once); marking it would cost more than it tells.
_COPY_MARK_NS = 1_000_000


def _timed_copy(inner):
    def copy(self, *args, **kwargs):
        if _events.sender is None or self.is_cuda:
            return inner(self, *args, **kwargs)
        start = time.time_ns()
        out = inner(self, *args, **kwargs)
        end = time.time_ns()
        if end - start >= _COPY_MARK_NS and getattr(out, "is_cuda", False):
            _events.phase_done("h2d_copy", start, end)
        return out

    copy._gpulse = True
    copy.__wrapped__ = inner
    copy.__name__ = inner.__name__
    copy.__doc__ = inner.__doc__
    return copy


def _timed_save(inner, phase):
    def save(*args, **kwargs):
        if _events.sender is None:
            return inner(*args, **kwargs)
        start = time.time_ns()
        try:
            return inner(*args, **kwargs)
        finally:
            _events.phase_done(phase, start, time.time_ns())

    save._gpulse = True
    save.__wrapped__ = inner
    save.__name__ = getattr(inner, "__name__", "save")
    save.__doc__ = inner.__doc__
    return save


def _patch_torch(module):
    tensor = getattr(module, "Tensor", None)
    if tensor is not None:
        for name in ("to", "cuda"):
            inner = getattr(tensor, name, None)
            if inner is not None and not getattr(inner, "_gpulse", False):
                setattr(tensor, name, _timed_copy(inner))
    save = getattr(module, "save", None)
    if save is not None and not getattr(save, "_gpulse", False):
        module.save = _timed_save(save, "checkpoint")
        serialization = sys.modules.get("torch.serialization")
        if serialization is not None and getattr(serialization, "save", None) is save:
            serialization.save = module.save


def _patch_dcp(module):
    for name in ("save", "save_state_dict"):
        inner = getattr(module, name, None)
        if inner is not None and not getattr(inner, "_gpulse", False):
            setattr(module, name, _timed_save(inner, "checkpoint"))


_TARGETS = {
    "torch": _patch_torch,
    "torch.utils.data.dataloader": _patch_dataloader,
    "torch.optim.optimizer": _patch_optimizer,
    "torch.distributed.checkpoint.state_dict_saver": _patch_dcp,
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
