"""A stand-in for ``torch.multiprocessing``'s ``spawn``, at real torch's module path."""

from .spawn import ProcessContext, spawn, start_processes  # noqa: F401
