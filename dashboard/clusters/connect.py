"""Parse and validate ZooKeeper connect strings (``host:port[,host:port...][/chroot]``).

Why strict: a typo here makes the mirror watch the wrong tree, or the root of a shared ZooKeeper,
silently. So every part is checked and every error says what was expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_HOST: Final = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)$")
_CHROOT_SEGMENT: Final = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True, slots=True)
class ConnectString:
    """A parsed connect string; ``str()`` gives it back normalised."""

    hosts: tuple[tuple[str, int], ...]
    chroot: str  # "" for the root

    def __str__(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.hosts) + self.chroot


def parse_connect_string(text: str) -> ConnectString:
    """Parse ``text`` or raise ``ValueError`` naming the part that is wrong."""
    value = text.strip()
    if not value:
        raise ValueError("the ZooKeeper connect string is empty (expected host:port[,host:port...][/chroot])")
    slash = value.find("/")
    host_part, chroot = (value, "") if slash < 0 else (value[:slash], value[slash:])
    hosts: list[tuple[str, int]] = []
    for raw_item in host_part.split(","):
        item = raw_item.strip()
        host, colon, port = item.rpartition(":")
        if not colon or not host:
            raise ValueError(f"{item!r} is not host:port (every ZooKeeper server needs an explicit port)")
        if not _HOST.match(host):
            raise ValueError(f"{host!r} is not a valid host name or address")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"port {port!r} of {host} is not a number between 1 and 65535")
        hosts.append((host, int(port)))
    if chroot:
        if chroot == "/":
            chroot = ""
        else:
            if chroot.endswith("/"):
                raise ValueError(f"chroot {chroot!r} must not end with '/'")
            for segment in chroot[1:].split("/"):
                if not segment or segment in {".", ".."} or not _CHROOT_SEGMENT.match(segment):
                    raise ValueError(
                        f"chroot {chroot!r} has an invalid segment {segment!r} "
                        "(use letters, digits, '.', '_' and '-' between slashes)"
                    )
    return ConnectString(tuple(hosts), chroot)
