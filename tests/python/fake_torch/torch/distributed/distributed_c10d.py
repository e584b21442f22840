"""Collectives over TCP, as gloo's are: rank 0 listens on ``MASTER_ADDR:MASTER_PORT``, each other
rank connects, and a collective returns on every rank once every rank has entered it."""

import os
import socket
import time

_group = None


class _Group:
    def __init__(self, rank, world_size, addr, port):
        self.rank, self.world_size = rank, world_size
        self.peers = []
        if rank == 0:
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((addr, port))
            server.listen(world_size)
            while len(self.peers) < world_size - 1:
                conn, _ = server.accept()
                self.peers.append(conn)
            server.close()
        else:
            deadline = time.monotonic() + 60
            while True:
                try:
                    self.peers.append(socket.create_connection((addr, port)))
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)

    def meet(self):
        """Returns once every rank has called it."""
        if self.rank == 0:
            for p in self.peers:
                _recv(p)
            for p in self.peers:
                p.sendall(b"g")
        else:
            self.peers[0].sendall(b"r")
            _recv(self.peers[0])


def _recv(sock):
    if not sock.recv(1):
        raise RuntimeError("a rank left the process group")


def init_process_group(backend="gloo", init_method=None, world_size=-1, rank=-1, **kwargs):
    global _group
    rank = int(os.environ["RANK"]) if rank < 0 else rank
    world_size = int(os.environ["WORLD_SIZE"]) if world_size < 0 else world_size
    _group = _Group(rank, world_size, os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]))


def is_initialized():
    return _group is not None


def get_rank(group=None):
    return _group.rank


def get_world_size(group=None):
    return _group.world_size


def barrier(group=None, async_op=False, device_ids=None):
    _group.meet()


def all_reduce(tensor, op=None, group=None, async_op=False):
    """Meets the other ranks, as a reduction does; the values are not summed."""
    _group.meet()
    return tensor


def destroy_process_group(group=None):
    global _group
    for p in _group.peers:
        p.close()
    _group = None
