"""ZooKeeper fault helpers for tests: real session expiry, dropped connections, server restarts.

Session expiry is done for real, the way ZooKeeper's own tests do it: a second client attaches to
the victim's session (same session id and password) and closes it, so the server expires the
session and the victim's client sees EXPIRED/LOST. Nothing is mocked.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import KazooState


@contextlib.contextmanager
def started_client(hosts: str, timeout: float = 10.0) -> Iterator[KazooClient]:
    """A kazoo client connected to ``hosts`` (a chroot, usually), stopped and closed afterwards."""
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02, what: str = "") -> None:
    """Poll until ``predicate()`` is true; fail the test with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def expire_session(client: KazooClient, hosts: str, timeout: float = 15.0) -> None:
    """Expire ``client``'s ZooKeeper session on the server and wait until the client sees LOST."""
    lost = threading.Event()

    def listener(state: str) -> bool:
        if state == KazooState.LOST:
            lost.set()
            return True
        return False

    client.add_listener(listener)
    session_id, password = client.client_id
    intruder = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=5.0)
    intruder.start(timeout=10)
    intruder.stop()  # closing the session from here expires it for the victim
    intruder.close()
    if not lost.wait(timeout):
        client.remove_listener(listener)
        raise AssertionError("the client never saw its session expire")


def drop_connection(client: KazooClient) -> None:
    """Cut the client's TCP connection (the session survives; the client reconnects)."""
    conn = client._connection  # kazoo has no public call for this
    sock = getattr(conn, "_socket", None)
    if sock is not None:
        # shutdown (not close): kazoo's select loop then reads EOF and reconnects cleanly.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def requests_from_process(host: str, port: int, pid: int) -> int:
    """How many requests the ZooKeeper server at ``host:port`` has received on process ``pid``'s
    connections (its four-letter ``cons``, matched to the process's sockets through ``/proc``).

    Why: a test that must act while another process is busy with ZooKeeper (reading what a change
    triggered, say) waits for this count to move instead of sleeping for a guessed time.
    """
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    local_ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if fields[9] in inodes and remote_port == port:
                    local_ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    with socket.create_connection((host, port), timeout=5) as conn:
        conn.sendall(b"cons")
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    total = 0
    for line in b"".join(chunks).decode(errors="replace").splitlines():
        match = re.search(r":(\d+)\[\d+\]\(.*?recved=(\d+)", line)
        if match and int(match.group(1)) in local_ports:
            total += int(match.group(2))
    return total


def delete_tree(client: KazooClient, root: str, batch: int = 500) -> None:
    """Delete ``root`` and everything under it: children listed level by level with pipelined reads,
    then deleted deepest first in multis of ``batch``.

    Why not ``client.delete(root, recursive=True)``: kazoo lists and deletes one znode per round trip,
    so a test's chroot with a few thousand partition znodes took 10 s of teardown on the CI machine.
    A multi that fails (a znode that came or went meanwhile, e.g. a session's ephemeral) leaves the
    rest to kazoo's recursive delete, which copes with such changes.
    """
    if client.exists(root) is None:
        return
    levels: list[list[str]] = [[root]]
    while levels[-1]:
        asked = [(path, client.get_children_async(path)) for path in levels[-1]]
        below = []
        for path, answer in asked:
            with contextlib.suppress(NoNodeError):
                below += [f"{path.rstrip('/')}/{child}" for child in answer.get()]
        levels.append(below)
    doomed = [path for level in reversed(levels) for path in level]
    for start in range(0, len(doomed), batch):
        tx = client.transaction()
        for path in doomed[start : start + batch]:
            tx.delete(path)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            with contextlib.suppress(NoNodeError):
                client.delete(root, recursive=True)
            return
