"""ranks_train.py under torch.multiprocessing.spawn: two ranks whose environment (as the kernel
shows it) holds no RANK; each rank sets it in os.environ for init_process_group, as mp.spawn
trainings do. Usage: python3 spawn_train.py TRUTH MODE STEPS [gloo|nccl]"""

import os
import runpy
import sys

import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))


def main(rank, argv):
    # The DataLoader's workers forked, as on Linux by default: a spawned worker would import
    # this file's __main__ again, which runpy has swapped for ranks_train.py.
    mp.set_start_method("fork", force=True)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    sys.argv = [os.path.join(HERE, "ranks_train.py")] + argv
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    mp.spawn(main, args=(sys.argv[1:],), nprocs=2)
