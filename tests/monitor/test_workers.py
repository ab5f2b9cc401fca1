"""Worker snapshots over unix sockets: every live worker answers, a dead one's socket goes."""

import os
import socket

from proxy.monitor import workers


def test_collect_reads_every_worker_and_drops_dead_sockets():
    directory = workers.make_directory()
    try:
        assert os.stat(directory).st_mode & 0o777 == 0o700
        workers.serve(directory, lambda: {"pid": os.getpid(), "names": {"get": 3}})
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(os.path.join(directory, "worker-1.sock"))
        dead.close()  # bound, never listening: what an exited worker leaves
        snapshots = workers.collect(directory)
        assert snapshots == [{"pid": os.getpid(), "names": {"get": 3}}]
        assert os.listdir(directory) == [f"worker-{os.getpid()}.sock"]
        assert workers.collect(directory) == snapshots  # the thread answers every scrape
    finally:
        workers.remove_directory(directory)
    assert not os.path.exists(directory)
