"""Browser sessions of one fetcher: one per (source policy, job, domain, identity, proxy).

A session is what a site sees as one visitor: one identity, its cookies, its proxy, its
connections. The key holds the identity and the proxy, so a block (the next attempt gets the
next identity and the next proxy) starts a new visitor from scratch, cookies included, and a
connection never carries two identities. Sessions idle for ``IDLE`` seconds are dropped, and
at most ``MAX_SESSIONS`` are kept (least recently used first out).
"""

from __future__ import annotations

import time
from collections import OrderedDict

from services.fetcher.browser import BrowserSession, Trust
from services.fetcher.identity import Identity
from services.fetcher.proxies import Proxy
from shared.guard import GuardedResolver

MAX_SESSIONS = 1024
IDLE = 900.0  # seconds; about how long a site's own session cookies last without activity

SessionKey = tuple[str, ...]


class Sessions:
    def __init__(self, max_sessions: int = MAX_SESSIONS, idle: float = IDLE) -> None:
        self._sessions: OrderedDict[SessionKey, BrowserSession] = OrderedDict()
        self.max_sessions = max_sessions
        self.idle = idle

    def get(
        self,
        scope: SessionKey,
        identity: Identity,
        proxy: Proxy | None,
        resolver: GuardedResolver,
        trust: Trust,
    ) -> BrowserSession:
        """The session of ``scope`` (policy, job, domain) for this identity and proxy."""
        key = (*scope, identity.id, proxy.id if proxy else "-", trust.ca_file or "-")
        session = self._sessions.get(key)
        now = time.monotonic()
        if session is not None and now - session.last_used < self.idle:
            self._sessions.move_to_end(key)
            return session
        session = BrowserSession(identity, proxy, resolver, trust, key)
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def __len__(self) -> int:
        return len(self._sessions)
