"""A stand-in for ``python -m torch.distributed.run`` (torchrun): starts ``--nproc_per_node``
ranks of a script with the environment torchrun gives each (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), then watches them in a monitor loop, as the
elastic agent does, until every rank has exited."""

import os
import socket
import subprocess
import sys
import time


def main(argv):
    nproc, i = 1, 0
    while i < len(argv) and argv[i].startswith("-"):
        arg = argv[i]
        if arg.startswith("--nproc_per_node=") or arg.startswith("--nproc-per-node="):
            nproc = int(arg.split("=", 1)[1])
        elif arg in ("--nproc_per_node", "--nproc-per-node"):
            i += 1
            nproc = int(argv[i])
        i += 1
    script, args = argv[i], argv[i + 1 :]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ranks = []
    for r in range(nproc):
        env = dict(
            os.environ,
            RANK=str(r),
            LOCAL_RANK=str(r),
            WORLD_SIZE=str(nproc),
            LOCAL_WORLD_SIZE=str(nproc),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        ranks.append(subprocess.Popen([sys.executable, script, *args], env=env))
    while any(p.poll() is None for p in ranks):
        time.sleep(0.1)
    return max(p.returncode for p in ranks)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
