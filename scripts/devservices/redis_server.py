"""A private Redis: ``redis-server`` from ``PATH`` (or ``REDIS_SERVER``), no persistence to the system's."""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass

from scripts.devservices.process import ManagedProcess, ServiceError


def redis_binary() -> str:
    found = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not found:
        raise ServiceError("redis-server not found: `scripts/services up` installs Debian's redis-server")
    return found


@dataclass(kw_only=True)
class RedisServer(ManagedProcess):
    """A private redis-server on a loopback port, no persistence unless asked."""

    name: str = "redis"
    persist: bool = False

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def command(self) -> list[str]:
        cmd = [
            redis_binary(),
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--dir",
            str(self.base_dir),
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--appendonly",
            "no",
            "--dbfilename",
            f"{self.name}.rdb",
        ]
        if not self.persist:
            cmd += ["--save", ""]
        return cmd

    def ready(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False
