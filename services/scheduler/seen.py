"""The links a scheduler replica knows are already in a job's frontier, so that a page's
repeated links (navigation, facets, related products) do not go to Postgres again.

Postgres stays the authority: the unique index on (job, url, request key) and ``ON CONFLICT``
decide what is admitted. The set only skips a link that is certainly in the job: one this
replica sent to the admission query in a transaction that committed (inserted then, or found
there already). Entries never leave a job, so a remembered link stays true. The set is exact
(a false positive would lose a link), starts empty, is bounded (least recently used out
first; a forgotten link costs one more round trip), and each replica keeps its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.lru import LRU

# (canonical URL, request key): what the unique index says makes an entry within a job.
LinkKey = tuple[str, str]


class SeenLinks:
    """At most ``capacity`` (job, canonical URL, request key) triples, least recently used out
    first. Not thread-safe: one event loop's set."""

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._keys: LRU[tuple[int, str, str], bool] = LRU(capacity)

    def job(self, job_id: int) -> JobLinks:
        """A view for one transaction: checks, and links staged until it commits."""
        return JobLinks(self, job_id)

    def known(self, job_id: int, key: LinkKey) -> bool:
        return self._keys.get((job_id, *key)) is not None

    def remember(self, job_id: int, keys: Iterable[LinkKey]) -> None:
        """Links now certainly in the job's frontier (their transaction committed)."""
        for url, request_key in keys:
            self._keys.put((job_id, url, request_key), True)

    def __len__(self) -> int:
        return len(self._keys)


class JobLinks:
    """One job's links within one transaction: ``known`` consults the set and the links staged
    so far (sent to the admission query in this transaction: in the job if it commits, and
    nothing is if it does not), ``stage`` holds the links sent, and ``commit`` (called once the
    transaction has committed) remembers them. A rolled-back transaction's view is simply
    dropped."""

    def __init__(self, seen: SeenLinks, job_id: int) -> None:
        self.seen = seen
        self.job_id = job_id
        self._staged: set[LinkKey] = set()

    def known(self, key: LinkKey) -> bool:
        return key in self._staged or self.seen.known(self.job_id, key)

    def stage(self, keys: Iterable[LinkKey]) -> None:
        self._staged.update(keys)

    def commit(self) -> None:
        self.seen.remember(self.job_id, self._staged)
        self._staged = set()
