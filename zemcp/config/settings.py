"""Settings: every knob of a zemcp server, with safe defaults.

Each field can be set in Python (``Settings(session_ttl=600)``) or through an environment
variable ``ZEMCP_<FIELD NAME IN CAPITALS>`` read by :meth:`Settings.from_env`. The list with
units and defaults lives in ``docs/configuration.md``; keep the two in step.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zemcp.config import checks, environment
from zemcp.config.rates import Rate, parse_rate, parse_tool_rates


@dataclass(frozen=True)
class StreamLimits:
    """The knobs of resumable streams (``Settings`` fields of the same meaning).

    Attributes:
        retry: [seconds] the SSE ``retry`` sent to clients: how long to wait before reconnecting.
        window: [seconds] how long a stream without a connection waits for its client, and how
            long a finished stream stays resumable.
        max_events: events one stream's replay buffer holds at most.
        max_bytes: [bytes] the most one stream's replay buffer holds (its last event is always kept).
        poll_interval: [seconds] a connection of a stream is ended (SSE polling) after this long; 0 never.
    """

    retry: float = 1.0
    window: float = 60.0
    max_events: int = 256
    max_bytes: int = 1024 * 1024
    poll_interval: float = 0.0


@dataclass(frozen=True)
class Settings:
    """Configuration of one zemcp process.

    Attributes (units in brackets):
        bind: ``host:port`` gunicorn listens on; also decides whether the ``Host`` header is
            checked (only when the host is a loopback address or ``localhost``).
        allowed_origins: exact ``scheme://host[:port]`` origins a browser may call from, in
            addition to loopback origins (``http(s)://localhost|127.0.0.1|[::1][:port]``),
            which are always allowed. A request without ``Origin`` is allowed.
        session_ttl: [seconds] a session idle this long is ended. A session with a pending
            elicitation or a running request is never idle.
        max_sessions: sessions one process holds at most (with :attr:`redis_url`, the whole
            deployment); beyond it ``initialize`` gets 429.
        max_pending_per_session: pending elicitations one session may have at once; never
            more than half the process's budget (see :attr:`session_pending_budget`).
        client_share: the fraction of each thread budget (running calls and streams, pending
            elicitations, listen streams, standalone streams) that one client may hold, at
            least one place; a client beyond it gets 429 with ``Retry-After``. A client is the
            principal with authorization on, else the client address. 1 lets one client take
            everything (a server whose only client is one backend).
        rate_limit: the token bucket of every client (the same client as for
            :attr:`client_share`): ``<count>/<second|minute|hour>`` (also ``s``, ``m``,
            ``h``), optionally followed by ``burst <n>``; ``120/minute`` lets a client send
            120 requests at once and then one every half second. Every JSON-RPC request POSTed
            over HTTP takes a token, except ``ping``; a request that finds none gets 429 with
            ``Retry-After``. Answers, notifications, GETs, DELETEs and stdio are never limited.
            Empty (the default): no limit. Per process unless :attr:`redis_url` shares the
            buckets.
        rate_limit_tools: token buckets per client for the calls of single tools, as
            comma-separated ``<tool>=<rate>`` pairs (``report=5/minute,search=1/s``); such a
            call takes a token from this bucket and from :attr:`rate_limit`'s. A tool's own
            ``rate_limit=`` (``@server.tool``) wins over its entry here. Empty: none.
        forwarded_allow_ips: the addresses or CIDR networks of the reverse proxies whose
            ``X-Forwarded-For`` header names the client address (``*`` trusts any peer);
            empty (the default) believes no such header, so behind a proxy every client
            counts as the proxy's address until the proxy is listed.
        max_client_info_bytes: [bytes] the largest ``clientInfo``, and the largest
            ``capabilities``, a client may declare at initialize (each measured as compact
            JSON; a session keeps both); beyond it initialize is refused with 400.
        access_log: where gunicorn.conf.py sends gunicorn's access log: ``""`` (off, the
            default: a line per request costs time on every request), ``"-"`` (stdout) or a
            file path.
        otel: ``auto`` (the default: OpenTelemetry spans and metrics when ``opentelemetry-api``
            is installed, ``zemcp[otel]``; they leave through the SDK the application
            configures) or ``off``.
        otel_capture_content: record tool arguments, results and elicited content on spans
            (``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``,
            ``zemcp.elicitation.content``); off by default: they may hold what users typed.
        metrics_path: the URL path of the Prometheus metrics (``/metrics``; needs
            ``zemcp[prometheus]``); empty (the default) serves none.
        metrics_allow: the client addresses or CIDR networks that may read
            :attr:`metrics_path` (loopback by default); with authorization on, a request
            with a valid access token may read it too.
        log_requests: log one ``zemcp.request`` record per served message (method, tool,
            duration, outcome, session fingerprint, trace id); off by default, like
            :attr:`access_log`.
        log_format: how zemcp's processes write their log lines: ``text`` (the default:
            gunicorn's and zemcp's lines as they always were) or ``json`` (one JSON object a
            line, :mod:`zemcp.logformat`).
        max_pending: pending elicitations the whole process may have at once; ``None``
            derives it from ``threads`` (see :attr:`pending_budget`).
        max_listen_streams: open 2026-07-28 ``subscriptions/listen`` streams the process
            may hold at once (each holds a thread); ``None`` derives it from ``threads``
            (see :attr:`listen_budget`); 0 turns ``subscriptions/listen`` off.
        max_standalone_streams: handshake-era sessions' standalone GET streams the process
            may have open at once (each open one holds a thread); ``None`` derives it from
            ``threads`` (see :attr:`standalone_budget`); 0 turns them off.
        elicitation_timeout: [seconds] how long a handler waits for the answer to an
            elicitation (and to the other server-to-client requests: sampling, roots).
        body_timeout: [seconds] longest silence while reading a request body under gunicorn;
            a client that stalls longer gets 408, so stalled uploads cannot hold threads.
        head_timeout: [seconds] under zemcp's gunicorn worker, how long a new connection may
            send nothing, and the longest silence while its request head is read; then the
            connection is closed, so silent or half-sent requests cannot hold threads.
        keepalive_interval: [seconds] gap between SSE comments on a waiting stream; also the
            bound on noticing a client that went away.
        stream_retry: [seconds] the SSE ``retry`` field of handshake-era streams (sent in
            milliseconds): how long a client waits before it reconnects to resume a stream.
        task_threads: threads of the task pool, which runs tasks (MCP tasks) apart from the
            call budget; tasks beyond it wait ``working`` for a free thread.
        max_tasks: tasks one process holds at most, running or finished and kept until their
            ttl; one client may hold ``max_tasks x client_share`` of them.
        task_ttl: [seconds] how long a task and its outcome are kept after it was created,
            and the most a client may ask for.
        task_poll_interval: [seconds] the ``pollInterval`` suggested to clients.
        resume_window: [seconds] how long a handshake-era stream whose client went away waits
            for it to resume with ``Last-Event-ID`` (its request keeps running meanwhile;
            then it is cancelled), and how long a finished stream stays resumable.
        stream_buffer_events: events one stream keeps for replay at most.
        stream_buffer_bytes: [bytes] the most one stream keeps for replay (its last event is
            always kept).
        max_replay_bytes: [bytes] the most the finished streams of the whole process keep
            for replay; beyond it the oldest are forgotten.
        stream_poll_interval: [seconds] when above 0, a connection of a handshake-era stream
            is ended after this long, with ``retry`` (SSE polling), and the client reconnects
            to go on; 0 (the default) keeps each connection open until its stream ends.
        max_body_bytes: [bytes] largest POST body accepted, chunked bodies included.
        threads: gunicorn gthread threads per worker; also the size of the handler pool.
        workers: gunicorn worker processes. 2026-07-28 clients are served by any number;
            handshake-era sessions live in the worker that created them unless
            :attr:`redis_url` shares them, so without it keep 1 for handshake-era clients (a
            session's request that reaches another worker gets 404 saying so).
        endpoint: URL path of the MCP endpoint.
        instance: this server instance's name, the prefix of its session ids
            (``<instance>.<worker>.<random>``) that a proxy routes on; 1-40 characters of
            ``A-Za-z0-9_-``. The default is random, so it is unique per :class:`Settings`;
            zemcp's gunicorn configuration sets ``ZEMCP_INSTANCE`` in the master before it forks,
            so that the workers of one gunicorn share one name.
        state_backend: where the state sessions share is kept (:mod:`zemcp.state`):
            ``memory`` (this process), ``redis`` (the Redis server of :attr:`redis_url`, so
            that every worker and instance serves every session), or ``auto`` (the default:
            ``redis`` when :attr:`redis_url` is set, else ``memory``).
        redis_url: ``redis://[user:password@]host:port/db`` or ``rediss://...`` (TLS) of the
            Redis server that holds the shared state (needs ``zemcp[redis]``); empty (the
            default) keeps everything in the process. Its credentials are never logged.
        redis_prefix: the prefix of every key and channel zemcp writes, so that several
            deployments can share one Redis database; 1-64 characters of ``A-Za-z0-9_.:-``.
        redis_timeout: [seconds] bound on one Redis command (and on connecting); a Redis
            that does not answer in time makes the request get 503 with ``Retry-After``.
        request_state_key: secrets (each at least 32 characters; comma-separated in the
            environment) that seal the 2026-07-28 ``requestState``: the first seals, any
            opens, so a new key can be rolled in before the old one is dropped. Every process
            that may serve a round of the same request needs the same keys; when empty, a
            random key per process (gunicorn.conf.py sets one per instance before forking).
        auth: ``off`` (the default: anyone who reaches the port may call every tool, so keep
            it on loopback), ``jwt`` (JWT access tokens checked against the authorization
            server's JWKS) or ``introspection`` (tokens checked by RFC 7662 introspection).
        auth_resource: this server's canonical URL, the audience tokens must be issued for
            and the ``resource`` of its metadata; ``http://<bind><endpoint>`` when empty
            (set it behind a proxy or TLS: ``https://mcp.example.com/mcp``).
        auth_issuer: the authorization server's issuer URL, exactly as its metadata spells it.
        auth_jwks_url: (``jwt``) the authorization server's ``jwks_uri``.
        auth_algorithms: (``jwt``) accepted signature algorithms (asymmetric ones only).
        auth_introspection_url: (``introspection``) the introspection endpoint.
        auth_client_id, auth_client_secret: (``introspection``) this server's own
            credentials at the authorization server.
        auth_scopes: scopes every request needs (space- or comma-separated in the
            environment); tools, prompts and resources can need more (``scopes=``).
        auth_leeway: [seconds] clock skew allowed on a token's expiry.
        auth_jwks_lifespan: [seconds] how long a fetched JWKS is used before it is fetched
            again, in the background (tokens of known keys are served meanwhile).
        auth_jwks_cooldown: [seconds] a token with an unknown key id makes the JWKS be fetched
            again only when the last successful fetch (the first one included) is older than
            this; also the longest pause between fetches after failures.
        auth_timeout: [seconds] bound on one request to the authorization server.
        auth_introspection_cache: [seconds] how long an active introspection answer is
            reused (never past the token's expiry); 0 asks every time.
    """

    bind: str = "127.0.0.1:8000"
    allowed_origins: tuple[str, ...] = field(default_factory=tuple)
    session_ttl: float = 1800.0
    max_sessions: int = 1024
    max_pending_per_session: int = 32
    client_share: float = 0.75
    rate_limit: str = ""
    rate_limit_tools: str = ""
    forwarded_allow_ips: tuple[str, ...] = ()
    max_client_info_bytes: int = 4096
    access_log: str = ""
    otel: str = "auto"
    otel_capture_content: bool = False
    metrics_path: str = ""
    metrics_allow: tuple[str, ...] = ("127.0.0.0/8", "::1/128")
    log_requests: bool = False
    log_format: str = "text"
    max_pending: int | None = None
    max_listen_streams: int | None = None
    max_standalone_streams: int | None = None
    elicitation_timeout: float = 600.0
    task_threads: int = 8
    max_tasks: int = 256
    task_ttl: float = 3600.0
    task_poll_interval: float = 1.0
    body_timeout: float = 10.0
    head_timeout: float = 5.0
    keepalive_interval: float = 15.0
    stream_retry: float = 1.0
    resume_window: float = 60.0
    stream_buffer_events: int = 256
    stream_buffer_bytes: int = 1024 * 1024
    max_replay_bytes: int = 32 * 1024 * 1024
    stream_poll_interval: float = 0.0
    max_body_bytes: int = 1024 * 1024
    threads: int = 32
    workers: int = 1
    endpoint: str = "/mcp"
    instance: str = field(default_factory=lambda: secrets.token_hex(4))
    state_backend: str = "auto"
    redis_url: str = field(default="", repr=False)
    redis_prefix: str = "zemcp:"
    redis_timeout: float = 1.0
    request_state_key: tuple[str, ...] = field(default_factory=tuple, repr=False)
    auth: str = "off"
    auth_resource: str = ""
    auth_issuer: str = ""
    auth_jwks_url: str = ""
    auth_algorithms: tuple[str, ...] = ("RS256", "ES256")
    auth_introspection_url: str = ""
    auth_client_id: str = ""
    auth_client_secret: str = field(default="", repr=False)
    auth_scopes: tuple[str, ...] = field(default_factory=tuple)
    auth_leeway: float = 10.0
    auth_jwks_lifespan: float = 300.0
    auth_jwks_cooldown: float = 30.0
    auth_timeout: float = 5.0
    auth_introspection_cache: float = 30.0

    def __post_init__(self) -> None:
        checks.check(self)

    @property
    def auth_resource_url(self) -> str:
        """This server's resource identifier: :attr:`auth_resource`, else ``http://<bind><endpoint>``."""
        return self.auth_resource or f"http://{self.bind}{self.endpoint}"

    @property
    def stream_limits(self) -> StreamLimits:
        """The knobs of resumable streams (:class:`StreamLimits`)."""
        return StreamLimits(
            retry=self.stream_retry,
            window=self.resume_window,
            max_events=self.stream_buffer_events,
            max_bytes=self.stream_buffer_bytes,
            poll_interval=self.stream_poll_interval,
        )

    @property
    def client_rate(self) -> Rate | None:
        """The token bucket of every client (:attr:`rate_limit`), or None without one."""
        return parse_rate(self.rate_limit, "rate_limit (ZEMCP_RATE_LIMIT)") if self.rate_limit else None

    @property
    def tool_rates(self) -> dict[str, Rate]:
        """Tool name -> the token bucket of its calls per client (:attr:`rate_limit_tools`)."""
        return parse_tool_rates(self.rate_limit_tools, "rate_limit_tools (ZEMCP_RATE_LIMIT_TOOLS)")

    @property
    def thread_reserve(self) -> int:
        """Threads kept free for answers and other requests: ``max(2, threads // 4)``."""
        return max(2, self.threads // 4)

    @property
    def call_budget(self) -> int:
        """Threads that requests holding one for long may take at once: running handlers
        (tools, prompts and resources that take a Context, pending elicitations included)
        plus open listen streams. ``threads - thread_reserve``: the reserve stays free for
        answers, cancellations, pings and DELETEs, and a call beyond it gets 503."""
        return self.threads - self.thread_reserve

    @property
    def session_pending_budget(self) -> int:
        """Pending elicitations one session may hold: ``max_pending_per_session``, but at most
        half the process's :attr:`pending_budget` (at least 1), so that one client cannot
        take every slot."""
        return min(self.max_pending_per_session, max(1, self.pending_budget // 2))

    @property
    def listen_budget(self) -> int:
        """Process-wide cap on open ``subscriptions/listen`` streams: ``max_listen_streams``
        if set, else ``min(4, (threads - thread_reserve) // 4)`` (4 at 32 threads)."""
        if self.max_listen_streams is not None:
            return self.max_listen_streams
        return min(4, (self.threads - self.thread_reserve) // 4)

    @property
    def standalone_budget(self) -> int:
        """Process-wide cap on open standalone GET streams of sessions: ``max_standalone_streams``
        if set, else ``min(4, (threads - thread_reserve) // 4)`` (4 at 32 threads)."""
        if self.max_standalone_streams is not None:
            return self.max_standalone_streams
        return min(4, (self.threads - self.thread_reserve) // 4)

    @property
    def pending_budget(self) -> int:
        """Process-wide cap on pending elicitations.

        Every pending elicitation holds one gunicorn thread (its open stream) until it is
        answered, and the answer arrives on a new POST that needs a thread of its own; so
        does every listen stream and open standalone stream. So the cap is
        ``threads - thread_reserve - listen_budget - standalone_budget`` unless
        ``max_pending`` sets it.
        """
        if self.max_pending is not None:
            return self.max_pending
        return max(1, self.threads - self.thread_reserve - self.listen_budget - self.standalone_budget)

    @property
    def bind_is_loopback(self) -> bool:
        """True when :attr:`bind` names a loopback host, so ``Host`` must be loopback too."""
        if self.bind.startswith("unix:"):
            return False
        host = self.bind.rsplit(":", 1)[0] if ":" in self.bind else self.bind
        return is_loopback_host(host)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``ZEMCP_*`` variables, then apply keyword ``overrides``.

        Args:
            environ: the variables to read; ``os.environ`` when omitted.
            overrides: field values that win over the environment.
        Returns:
            a validated :class:`Settings`.
        Raises:
            ValueError: a variable does not parse (the message names it and the expected form)
                or a value is out of range.
        """
        environ = os.environ if environ is None else environ
        values = environment.read(cls, environ)
        values.update(overrides)
        return cls(**values)


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (brackets around IPv6 allowed)."""
    host = host.strip().lower().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
