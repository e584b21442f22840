"""``torch.multiprocessing.spawn`` as real torch lays it out: each process runs ``_wrap(fn, i,
args)`` under multiprocessing's spawn start method, and the parent waits in
``ProcessContext.join`` until every process has exited."""

import multiprocessing
import multiprocessing.connection


def _wrap(fn, i, args):
    fn(i, *args)


class ProcessContext:
    def __init__(self, processes):
        self.processes = processes

    def join(self, timeout=None):
        """True once every process has exited; else waits up to ``timeout`` for one to."""
        alive = [p.sentinel for p in self.processes if p.is_alive()]
        if not alive:
            return True
        multiprocessing.connection.wait(alive, timeout=timeout)
        return all(not p.is_alive() for p in self.processes)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    mp = multiprocessing.get_context(start_method)
    processes = []
    for i in range(nprocs):
        p = mp.Process(target=_wrap, args=(fn, i, args), daemon=daemon)
        p.start()
        processes.append(p)
    context = ProcessContext(processes)
    if not join:
        return context
    while not context.join():
        pass
    if any(p.exitcode for p in processes):
        raise RuntimeError("a spawned process failed")


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    return start_processes(fn, args, nprocs, join, daemon, start_method)
