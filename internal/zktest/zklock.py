#!/usr/bin/python3
"""Runs a command under a kazoo Lock on a ZooKeeper lock path, as a Python
user of ZooKeeper would: the peer of lockrun's ZooKeeper backend in the
benchmarks, and the other client of the interoperation tests.

Usage: zklock.py HOSTS PATH [TIMEOUT] -- COMMAND [ARGS...]

TIMEOUT (seconds) gives up waiting with exit 75, as lockrun does. The
lock also counts lockrun's and Curator's nodes ("...-lock-<seq>") as
contenders, so all three exclude each other on one path.
"""
import subprocess
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout


def main(argv):
    sep = argv.index("--")
    opts, cmd = argv[1:sep], argv[sep + 1:]
    hosts, path = opts[0], opts[1]
    timeout = float(opts[2]) if len(opts) > 2 else None
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=5)
    try:
        lock = zk.Lock(path, extra_lock_patterns=("-lock-",))
        try:
            lock.acquire(timeout=timeout)
        except LockTimeout:
            return 75
        try:
            return subprocess.call(cmd)
        finally:
            lock.release()
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
