#!/usr/bin/python3
"""Takes one lease of a kazoo Semaphore, as a Python user of ZooKeeper
would: the other client of lockrun's semaphore interoperation test.

Usage: zksem.py HOSTS PATH MAX_LEASES

Tries once, without waiting: prints "acquired" and holds the lease until
its stdin closes, or prints "busy" and exits.
"""
import sys

from kazoo.client import KazooClient


def main(argv):
    hosts, path, leases = argv[1], argv[2], int(argv[3])
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=5)
    try:
        sem = zk.Semaphore(path, max_leases=leases)
        if not sem.acquire(blocking=False):
            print("busy", flush=True)
            return 0
        print("acquired", flush=True)
        sys.stdin.read()
        sem.release()
        return 0
    finally:
        zk.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
