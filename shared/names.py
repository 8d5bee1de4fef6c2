"""Every NATS name trawl uses, built from the namespace. No subject literal lives elsewhere."""

from __future__ import annotations

from dataclasses import dataclass

# Header names carried on messages.
MSG_ID = "Nats-Msg-Id"
DLQ_REASON = "Trawl-Dlq-Reason"
DLQ_STREAM = "Trawl-Dlq-Stream"
DLQ_SUBJECT = "Trawl-Dlq-Subject"
DLQ_DELIVERED = "Trawl-Dlq-Delivered"
# The header of the server's status replies (a pull's end, a direct get's miss, no responders).
STATUS = "Status"

# Stream keys: the short name of each stream (also its DLQ suffix).
TRIGGER = "trigger"
FETCH = "fetch"
RENDER = "render"  # fetch work for pages a browser must render
FETCHED = "fetched"
PARSED = "parsed"
EVENTS = "events"
DLQ = "dlq"

JOB_EVENTS = ("started", "progress", "completed", "cancelled", "refreshed")


@dataclass(frozen=True)
class Names:
    """Subjects, streams, consumers and buckets of one namespace."""

    ns: str

    # -- subjects ---------------------------------------------------------------------------
    @property
    def trigger(self) -> str:
        return f"{self.ns}.trigger"

    @property
    def fetch(self) -> str:
        return f"{self.ns}.fetch"

    @property
    def render(self) -> str:
        return f"{self.ns}.render"

    @property
    def fetched(self) -> str:
        return f"{self.ns}.fetched"

    @property
    def parsed(self) -> str:
        return f"{self.ns}.parsed"

    def job_event(self, job_id: int | str, event: str) -> str:
        return f"{self.ns}.events.job.{job_id}.{event}"

    def job_events(self, job_id: int | str = "*") -> str:
        """Wildcard over one job's events (or every job's with the default)."""
        return f"{self.ns}.events.job.{job_id}.*"

    @property
    def job_completed_any(self) -> str:
        return f"{self.ns}.events.job.*.completed"

    def product_change(self, source: str, kind: str) -> str:
        return f"{self.ns}.events.product.{source}.{kind}"

    def product_changes(self, source: str = "*", kind: str = "*") -> str:
        """Wildcard over a source's product changes (every source's with the default)."""
        return f"{self.ns}.events.product.{source}.{kind}"

    @property
    def events_all(self) -> str:
        return f"{self.ns}.events.>"

    def owns(self, subject: str) -> bool:
        """Whether ``subject`` is one of this namespace's."""
        return subject.startswith(f"{self.ns}.")

    def dlq(self, stream_key: str) -> str:
        return f"{self.ns}.dlq.{stream_key}"

    @property
    def dlq_all(self) -> str:
        return f"{self.ns}.dlq.>"

    def payload(self, digest: str) -> str:
        return f"{self.ns}.payload.{digest}"

    @property
    def payload_all(self) -> str:
        return f"{self.ns}.payload.>"

    def payload_direct_get(self, digest: str, api_prefix: str = "$JS.API") -> str:
        """The direct-get request for a payload's last (only) message, on the JetStream API of
        ``api_prefix`` (the context's; another under a JetStream domain)."""
        return f"{api_prefix}.DIRECT.GET.{self.payload_stream}.{self.payload(digest)}"

    # -- streams ----------------------------------------------------------------------------
    def stream(self, key: str) -> str:
        return f"{self.ns}_{key}"

    @property
    def payload_stream(self) -> str:
        return f"{self.ns}_payloads"

    # -- consumers (durable names: one per service and input) -------------------------------
    def consumer(self, service: str, key: str) -> str:
        return f"{service}-{key}"

    @staticmethod
    def pull_request(stream: str, durable: str) -> str:
        """The JetStream API subject a pull consumer's requests for messages go to."""
        return f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"

    # -- buckets ----------------------------------------------------------------------------
    @property
    def robots_bucket(self) -> str:
        return f"{self.ns}_robots"

    @property
    def sources_bucket(self) -> str:
        return f"{self.ns}_sources"

    @property
    def proxies_bucket(self) -> str:
        return f"{self.ns}_proxies"

    @property
    def cookies_bucket(self) -> str:
        """The fetchers' browser sessions' cookies, so a session keeps them on any replica."""
        return f"{self.ns}_cookies"

    @property
    def large_payload_bucket(self) -> str:
        return f"{self.ns}_payloads_large"

    # -- service API (nats.micro) -----------------------------------------------------------
    def micro_service(self, service: str) -> str:
        return f"{self.ns}-{service}"

    def service_stats(self, service: str) -> str:
        """The subject of a service's own stats endpoint (beside ``$SRV.STATS``)."""
        return f"{self.ns}.svc.{service}.stats"

    @staticmethod
    def service_api(verb: str) -> str:
        """The NATS service API subject every instance answers (``PING``, ``INFO``, ``STATS``)."""
        return f"$SRV.{verb}"

    # -- queue group for the trigger request path ------------------------------------------
    @property
    def trigger_queue(self) -> str:
        return f"{self.ns}-scheduler"
