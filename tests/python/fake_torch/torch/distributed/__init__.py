"""A stand-in for ``torch.distributed``: a process group whose collectives are real barriers over
TCP sockets, with c10d's names and module path, so a rank waiting in one shows the frames a real
rank shows. CI has no PyTorch."""

from .distributed_c10d import (  # noqa: F401
    all_reduce,
    barrier,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
)
