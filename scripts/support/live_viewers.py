"""Live viewers for the dashboard benchmarks: WebSocket clients that speak the page's protocol.

A ``Viewer`` keeps what ``static/js/live.js`` keeps (the snapshot, sequence-checked deltas, a resync
on a gap, another ``gen`` or a heartbeat's ``scope_seqs``) and the time each change reached it;
``ViewerPool`` runs many on one asyncio loop in a thread; ``login`` gets a session cookie through
the login form. Used by ``scripts/bench_viewers.py`` and its small run in the test suite.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import re
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from scripts.support.live_rig import PASSWORD, LiveRig

KEY = "p:OfflinePartition"
"""The count each viewer follows: partitions offline (the failover raises it, the recovery lowers it)."""
RESYNC_RETRY_S = 2.0


# -- one viewer -------------------------------------------------------------------------------------
@dataclass
class Viewer:
    """One live page's state as ``live.js`` keeps it, with when each value of ``KEY`` appeared."""

    page: str
    scope: str
    gen: str | None = None
    seq: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    resync_asked: float | None = None
    resyncs: list[float] = field(default_factory=list)  # seconds from asking to the snapshot
    gaps: int = 0
    snapshot_bytes: int = 0
    before_storm: tuple[int, int] | None = None  # (gaps, resyncs) when the resync storm began
    connected: bool = False
    error: str | None = None

    def note(self) -> None:
        value = self.counts.get(KEY, 0)
        if not self.timeline or self.timeline[-1][1] != value:
            self.timeline.append((time.time() * 1000.0, value))

    def handle(self, msg: dict[str, Any]) -> bool:
        """Apply one server message; True when the page would ask for a resync now."""
        kind = msg.get("kind")
        if kind == "snapshot":
            if self.resync_asked is not None:
                self.resyncs.append(time.monotonic() - self.resync_asked)
                self.resync_asked = None
            self.gen, self.seq = msg.get("gen"), msg.get("seq")
            self.counts = dict((msg.get("data") or {}).get("counts") or {})
            self.note()
            return False
        if kind == "delta":
            if self.gen is None or self.resync_asked is not None:
                return False
            if msg.get("gen") != self.gen or int(msg["prev"]) > int(self.seq or 0):
                return True
            if int(msg["seq"]) <= int(self.seq or 0):
                return False
            self.seq = int(msg["seq"])
            self.counts.update((msg.get("data") or {}).get("counts") or {})
            self.note()
            return False
        if kind == "status":
            status = msg.get("status") or {}
            sent = (status.get("scope_seqs") or {}).get(self.scope)
            same_gen = status.get("gen") == self.gen and self.gen is not None
            if status.get("gen") and self.gen and status.get("gen") != self.gen and not status.get("resync_pending"):
                return True
            return isinstance(sent, int) and same_gen and self.seq is not None and sent > self.seq
        return kind == "resync"

    def value(self) -> int:
        return self.counts.get(KEY, 0)


async def run_viewer(viewer: Viewer, url: str, cookie: str, origin: str, stop: asyncio.Event) -> None:
    from websockets.asyncio.client import connect

    try:
        async with connect(
            url, additional_headers={"Cookie": cookie, "Origin": origin}, max_size=None, open_timeout=60
        ) as ws:
            viewer.connected = True
            await ws.send(json.dumps({"action": "subscribe", "scope": viewer.scope}))
            while not stop.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
                except TimeoutError:
                    raw = None
                msg = json.loads(raw) if raw is not None else None
                if msg is not None and msg.get("kind") == "snapshot" and not viewer.snapshot_bytes:
                    viewer.snapshot_bytes = len(raw or "")
                if msg is not None and viewer.handle(msg) and viewer.resync_asked is None:
                    viewer.gaps += 1
                    viewer.resync_asked = time.monotonic()
                    await ws.send(json.dumps({"action": "resync"}))
                elif viewer.resync_asked is not None and time.monotonic() - viewer.resync_asked > RESYNC_RETRY_S:
                    await ws.send(json.dumps({"action": "resync"}))  # no snapshot came: ask again (live.js)
    except Exception as exc:
        viewer.error = f"{type(exc).__name__}: {exc}"
    finally:
        viewer.connected = False


class ViewerPool:
    """N viewers on an asyncio loop of their own thread (the main thread drives Playwright)."""

    def __init__(self, rig: LiveRig, viewers: list[Viewer], cookies: list[str]) -> None:
        self.loop = asyncio.new_event_loop()
        self.viewers = viewers
        self.stop = asyncio.Event()
        ws_url = f"ws://127.0.0.1:{rig.port}/ws/clusters/bench/live/"
        self._thread = threading.Thread(target=self._run, args=(ws_url, rig.base_url, cookies), daemon=True)

    def _run(self, ws_url: str, origin: str, cookies: list[str]) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> None:
            self.stop = asyncio.Event()
            tasks = [
                asyncio.create_task(run_viewer(v, ws_url, cookies[i % len(cookies)], origin, self.stop))
                for i, v in enumerate(self.viewers)
            ]
            await asyncio.gather(*tasks)

        self.loop.run_until_complete(main())

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self._thread.join(30)


# -- sessions and page loads ------------------------------------------------------------------------
def login(base: str, username: str) -> tuple[urllib.request.OpenerDirector, str]:
    """Log in through the form; the opener keeps the session, the string is a Cookie header."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(base + "/accounts/login/", timeout=60) as answer:
        page = answer.read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if token is None:
        raise RuntimeError("the login form has no CSRF token")
    body = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token.group(1), "username": username, "password": PASSWORD}
    ).encode()
    request = urllib.request.Request(base + "/accounts/login/", data=body, headers={"Referer": base + "/"})
    with opener.open(request, timeout=60) as answer:
        answer.read()
    cookies = {c.name: c.value for c in jar}
    if "sessionid" not in cookies:
        raise RuntimeError(f"logging in {username} failed")
    return opener, "; ".join(f"{k}={v}" for k, v in cookies.items())
