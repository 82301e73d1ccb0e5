"""Settings: every knob of a zemcp server, with safe defaults.

Each field can be set in Python (``Settings(session_ttl=600)``) or through an environment
variable ``ZEMCP_<FIELD NAME IN CAPITALS>`` read by :meth:`Settings.from_env`. Each is declared
once, in the class body; ``docs/configuration.md`` lists them, generated from the declarations
(:mod:`zemcp.config.reference`).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zemcp.config import checks, environment
from zemcp.config.declaration import setting
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

    Each field is declared once, with :func:`~zemcp.config.declaration.setting`: its kind (how
    ``ZEMCP_<FIELD NAME IN CAPITALS>`` parses), unit, default, check and description. The
    settings reference, ``docs/configuration.md``, is generated from these declarations
    (``python -m zemcp.config.reference``); read it for what each field does.
    """

    bind: str = setting(
        "127.0.0.1:8000",
        kind="str",
        unit="`host:port`",
        doc="""The address gunicorn listens on (through `gunicorn.conf.py`); `unix:PATH` is accepted too. While it
        names a loopback host (`127.x.x.x`, `::1`, `localhost`), requests whose `Host` header is not a loopback name
        are refused (403).""",
    )
    allowed_origins: tuple[str, ...] = setting(
        (),
        kind="list",
        unit="comma-separated `scheme://host[:port]`",
        check=checks.ORIGINS,
        doc="""Browser origins allowed besides the loopback origins (`http`/`https` on `localhost`, `127.x.x.x`,
        `[::1]`, any port), which are always allowed. Compared exactly, ignoring case and a trailing slash. A request
        without `Origin` is always allowed.""",
    )
    session_ttl: float = setting(
        1800.0,
        kind="seconds",
        note="30 min",
        check=checks.POSITIVE_SECONDS,
        doc="""A handshake-era session without traffic for this long is ended. A session with a running request
        (including a pending elicitation) or a running task ([tasks.md](tasks.md)), or whose standalone stream is open
        (or was, less than `resume_window` ago), is never idle. Idle sessions are looked for every `min(30, max(0.5,
        session_ttl / 4))` seconds. 2026-07-28 requests have no session.""",
    )
    max_sessions: int = setting(
        1024,
        kind="int",
        unit="sessions",
        check=checks.AT_LEAST_ONE,
        doc="""Live handshake-era sessions one process holds at most (with `ZEMCP_REDIS_URL`: the whole deployment,
        every worker and instance counted together); beyond it `initialize` gets 429 with `Retry-After: 30`.""",
    )
    max_pending_per_session: int = setting(
        32,
        kind="int",
        unit="requests",
        check=checks.AT_LEAST_ONE,
        doc="""Pending server-to-client requests (elicitation, sampling, roots, counted together) one session may have
        at once, but never more than half the process's `pending_budget` (`session_pending_budget` below), so one
        client cannot take every slot; one more fails before anything is sent: `ElicitTooMany` for an elicitation,
        `ClientRequestError` for sampling and roots. A 2026-07-28 request holds none while it waits for its next round.
        With `ZEMCP_REDIS_URL` the cap counts the session's waiting requests in every process.""",
    )
    client_share: float = setting(
        0.75,
        kind="number",
        check=checks.CLIENT_SHARE,
        doc="""The part of each thread budget (the call budget, `pending_budget`, `listen_budget`, `standalone_budget`)
        that one client may hold, however many sessions it opens: `floor(budget \N{MULTIPLICATION SIGN} share)`, at
        least 1. A client is the user (issuer and subject of the token, whichever OAuth client it was issued to) with
        authorization on, else the client address. Beyond it that client's call or listen stream gets 429 with
        `Retry-After: 2` naming this setting, its elicitation fails with `ElicitTooMany`, its standalone GET is told to
        come back in 30 s; other clients are served ([transport.md](transport.md#fair-shares)). Above 0 and at most 1;
        `1` lets one client take everything (a server whose only client is one backend). Counted per process, like the
        budgets: under N workers a client may hold N times its share
        ([deploy.md](deploy.md#capacity-n-workers-hold-n-times-the-budgets)).""",
    )
    rate_limit: str = setting(
        "",
        kind="str",
        unit="`<count>/<second|minute|hour>` (also `s`, `m`, `h`), optionally followed by `burst <n>`",
        note="off",
        check=checks.RATE,
        doc="""A token bucket per client (the same client as for `client_share`: the user with authorization on, else
        the client address): it holds `count` tokens (or `n` with `burst n`) and gets `count` back per period, evenly;
        `120/minute` lets a client send 120 requests at once, then one every half second. Every JSON-RPC request POSTed
        over HTTP takes a token, in both eras, except `ping`; one that finds the bucket empty gets 429 with
        `Retry-After` (whole seconds until a token, at least 1) and a JSON-RPC error -32603 naming this setting, before
        any handler runs. Answers to the server's questions, notifications, GETs, DELETEs and stdio are never limited.
        Without `ZEMCP_REDIS_URL` each worker keeps its own buckets, so a client gets up to `workers` times the limit;
        with it, the buckets are one for the whole deployment ([observability.md](observability.md#rate-limits)). Count
        and burst between 1 and 10⁹.""",
    )
    rate_limit_tools: str = setting(
        "",
        kind="str",
        unit="comma-separated `<tool>=<rate>`, each rate as for `ZEMCP_RATE_LIMIT`",
        note="none",
        check=checks.TOOL_RATES,
        doc="""Token buckets per client for the calls of single tools, for example `report=5/minute,search=1/s`: a
        `tools/call` of such a tool takes a token from its bucket and from the `ZEMCP_RATE_LIMIT` one (from both or,
        when either is empty, from neither; the 429 names the bucket that was empty). A tool's own
        `@server.tool(rate_limit=...)` wins over its entry here; a name no tool has limits nothing, and the log warns
        of it when the endpoint is built (`McpApp`).""",
    )
    forwarded_allow_ips: tuple[str, ...] = setting(
        (),
        kind="list",
        unit="comma-separated IP addresses, CIDR networks, or `*`",
        check=checks.PROXIES,
        doc="""The reverse proxies whose `X-Forwarded-For` names the client address for the fair shares (read from the
        right: the first address that is not a listed proxy is the client; list proxies, not networks that also hold
        clients). Empty: the header is never believed, so behind a proxy every client counts as the proxy until it is
        listed (the log says so once). `*` believes any peer for one hop (the last address of the header is the
        client): only when nothing but your proxy can reach the port. gunicorn's own `forwarded_allow_ips` is a
        separate setting (it decides the URL scheme).""",
    )
    max_client_info_bytes: int = setting(
        4096,
        kind="int",
        unit="bytes",
        check=checks.AT_LEAST_ONE,
        doc="""The largest `clientInfo`, and the largest `capabilities`, a client may declare, each measured as compact
        JSON, in `initialize`: a session keeps both for its whole life. Beyond it `initialize` is refused with 400 and
        -32602 naming this setting. (A 2026-07-28 request keeps its envelope only while it runs; the body limit bounds
        it.) Real clients send a few hundred bytes.""",
    )
    access_log: str = setting(
        "",
        kind="str",
        unit="target",
        note="off",
        doc="""Where `gunicorn.conf.py` sends gunicorn's access log: empty for none, `-` for standard output, or a file
        path. Off by default, because a line per request is work on every request; turn it on when someone reads
        it.""",
    )
    otel: str = setting(
        "auto",
        kind="str",
        unit="mode",
        check=checks.OTEL,
        doc="""`auto`: OpenTelemetry spans and metrics by the conventions for MCP whenever `opentelemetry-api` is
        installed (`zemcp[otel]`); they leave through the SDK and exporters the application configures, and cost next
        to nothing without one. `off`: none (either word in any case). Without the package nothing is imported or
        recorded ([observability.md](observability.md#traces)).""",
    )
    otel_capture_content: bool = setting(
        False,
        kind="bool",
        doc="""Record tool arguments (`gen_ai.tool.call.arguments`), results (`gen_ai.tool.call.result`) and elicited
        content (`zemcp.elicitation.content`) on spans. Off by default: they may hold what users typed.""",
    )
    metrics_path: str = setting(
        "",
        kind="str",
        unit="URL path",
        note="off",
        check=checks.METRICS_PATH,
        doc="""Serve Prometheus text at this path (`/metrics`; needs `prometheus_client`, `zemcp[prometheus]`); under
        zemcp's gunicorn configuration the figures of every worker add up (multiprocess mode,
        [observability.md](observability.md#metrics)). Must differ from the MCP endpoint.""",
    )
    metrics_allow: tuple[str, ...] = setting(
        ("127.0.0.0/8", "::1/128"),
        kind="list",
        unit="networks",
        check=checks.NETWORKS,
        doc="""Client addresses or CIDR networks that may read `ZEMCP_METRICS_PATH` (comma-separated; the address is
        the one `ZEMCP_FORWARDED_ALLOW_IPS` resolves). With authorization on, a request with a valid access token may
        read it too; a unix socket's peer may. Others get 403.""",
    )
    log_requests: bool = setting(
        False,
        kind="bool",
        doc="""Log one `zemcp.request` record per served message: method, tool, duration, outcome, session fingerprint,
        trace id. Off by default, like the access log.""",
    )
    audit_log: bool = setting(
        False,
        kind="bool",
        doc="""Log one `zemcp.audit` record per `tools/call` (a task's once its run ends), `prompts/get` and
        `resources/read` once it ends, those refused for a missing scope or the call budget included (a rate-limited
        one is counted as a refusal instead): `method`, `tool` (the tool or prompt name, or the resource URI),
        `arguments` (their names), `outcome` (`ok`, `tool_error`, `declined`, `cancelled`, `refused`, `timeout`,
        `input_required`, `error`) and its `reason`, `duration`, `user`, `subject`, `client`, `protocol_version`,
        `session` and `task_id`; never results, and argument values only with `ZEMCP_AUDIT_ARGUMENT_VALUES`
        ([observability.md](observability.md#the-audit-log)). Off by default. Hooks a site registers with
        `server.on_audit` receive the records either way.""",
    )
    audit_argument_values: bool = setting(
        False,
        kind="bool",
        doc="""Put the arguments' values in the audit records (`values`), besides their names: in the `zemcp.audit`
        log and in what `server.on_audit` hooks receive. Off by default: arguments may hold secrets and what users
        typed.""",
    )
    log_format: str = setting(
        "text",
        kind="str",
        unit="`text` or `json`",
        check=checks.LOG_FORMAT,
        doc="""How every log line of zemcp's processes is written: zemcp's own records, gunicorn's error log and, when
        `ZEMCP_ACCESS_LOG` is on, its access log, under `gunicorn.conf.py` and `zemcp run` (HTTP and stdio). `text`:
        the lines as they always were. `json`: one JSON object a line, with `time`, `level`, `logger`, `event`,
        `message`, `pid` and, when a record has them, `method`, `tool`, `arguments`, `values`, `duration`, `outcome`,
        `reason`, `session` (a fingerprint), `user`, `subject`, `client`, `protocol_version`, `task_id`, `trace_id`,
        `span_id`, `exc_type`, `exc_text`
        ([observability.md](observability.md#structured-logs)). Either word in any case; any other value stops the
        server at start-up.""",
    )
    max_pending: int | None = setting(
        None,
        kind="int or unset",
        unit="requests",
        note="derived",
        doc="""Pending server-to-client requests of sessions the whole process may have at once. Unset:
        `pending_budget` is derived from `threads` (below). When set it must be between 1 and `threads - listen_budget
        - standalone_budget - 1`.""",
    )
    max_listen_streams: int | None = setting(
        None,
        kind="int or unset",
        unit="streams",
        note="derived",
        doc="""Open 2026-07-28 `subscriptions/listen` streams the whole process may hold at once; each holds a gunicorn
        thread for as long as it is open. Unset: `listen_budget` is derived from `threads` (below). When set it must be
        between 0 and `threads - 2`; `0` turns listening off (`server/discover` then advertises `listChanged: false`
        and no `subscribe`). One stream more is answered 429 with `Retry-After: 30`.""",
    )
    max_standalone_streams: int | None = setting(
        None,
        kind="int or unset",
        unit="streams",
        note="derived",
        doc="""Standalone GET streams of handshake-era sessions the whole process may have open at once (one per
        session at most; [transport.md](transport.md#the-standalone-get-stream)); each open one holds a gunicorn
        thread. Unset: `standalone_budget` is derived from `threads` (below). When set it must be between 0 and
        `threads - 2`; `0` turns them off (`initialize` then advertises `listChanged: false` and no `subscribe`, and a
        GET without `Last-Event-ID` gets 405). One stream more gets an event stream that carries `retry: 30000` and
        ends at once, so the client comes back 30 s later holding no thread
        ([transport.md](transport.md#no-room-for-a-standalone-stream)).""",
    )
    elicitation_timeout: float = setting(
        600.0,
        kind="seconds",
        note="10 min",
        check=checks.POSITIVE_SECONDS,
        doc="""In a session, how long a handler waits for the client's answer to a server-to-client request: an
        elicitation (then `ElicitTimeout`), and also a sampling or roots request (then `ClientTimeout`); the server
        then sends `notifications/cancelled` for its request. In 2026-07-28, the lifetime of a `requestState`: a round
        sent later than this after the previous one is refused with -32602 and must start again.""",
    )
    task_threads: int = setting(
        8,
        kind="int",
        unit="threads",
        check=checks.AT_LEAST_ONE,
        doc="""Threads of the task pool, which runs the calls that became tasks ([tasks.md](tasks.md)). They are apart
        from gunicorn's threads and the call budget, so long tasks never take the threads that answers, cancels and
        pings need. A task beyond them waits, `working` with the status message "waiting for a free task thread", until
        one is free. At least 1.""",
    )
    max_tasks: int = setting(
        256,
        kind="int",
        unit="tasks",
        check=checks.AT_LEAST_ONE,
        doc="""Tasks one process holds at most (with `ZEMCP_REDIS_URL`: the whole deployment), running, waiting or
        finished and kept until their ttl; one client may hold `floor(max_tasks \N{MULTIPLICATION SIGN} client_share)`
        of them (at least 1). One more gets 429 with `Retry-After: 30` and a message naming this setting. At least
        1.""",
    )
    task_ttl: float = setting(
        3600.0,
        kind="seconds",
        note="1 h",
        check=checks.POSITIVE_SECONDS,
        doc="""How long a task and its outcome are kept, counted from its creation (`ttl` in 2025-11-25, `ttlMs` in
        2026-07-28); the most a client may ask for with `params.task.ttl` (a shorter request is honoured, at least 1
        s). A finished task past it is forgotten (`tasks/get` then answers -32602); a task still running is kept until
        it ends.""",
    )
    task_poll_interval: float = setting(
        1.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""The `pollInterval` (`pollIntervalMs`) a task suggests to its client between two `tasks/get`.""",
    )
    body_timeout: float = setting(
        10.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""Under gunicorn, the longest silence while a POST body is read: a client that sends no byte of its body
        for this long gets 408, and the read side of its connection is shut so the thread is free at once. It bounds
        each wait for the next bytes, not the whole upload (see [Safe defaults](#safe-defaults)). It also bounds each
        write to an event stream whose client reads nothing: after this long the client counts as gone (a session's
        stream then waits for it to resume, `ZEMCP_RESUME_WINDOW`). Not applied under other WSGI servers.""",
    )
    head_timeout: float = setting(
        5.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""Under zemcp's gunicorn worker (`zemcp.http.worker.ThreadWorker`, which `gunicorn.conf.py` selects): how
        long a connection may take to send a whole request head, on a new connection and before every later request on
        a kept-alive one. The head is gathered on the worker's poller, which holds no thread (also for a request
        pipelined behind another), and only a whole head is handed to a thread; a connection still short of one after
        this long is closed, and one whose head grows past 64 KiB is answered 431 and closed. So connections that send
        nothing, or half a head, hold no thread and go away after this long. Under TLS each wait for more bytes of a
        head is bounded by it instead.""",
    )
    keepalive_interval: float = setting(
        15.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""Gap between `: keep-alive` comments on a waiting event stream (a pending elicitation, a listen stream);
        under gunicorn a vanished client is looked for every second (or every interval, when it is shorter), so its
        thread and slot come back within about two seconds (a keep-alive comment probes a socket that reads as ended,
        which a half-closed client takes: see [transport.md](transport.md#noticing-a-client-that-went-away); two
        keep-alive intervals when it had sent more bytes before closing). Keep it at most half the read timeout of any
        proxy in front (nginx: 60 s by default), so one lost comment does not cut the stream.""",
    )
    stream_retry: float = setting(
        1.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""The `retry` field of handshake-era event streams (sent in milliseconds, in the priming event and before
        the server ends a connection): how long a client waits before it reconnects with `Last-Event-ID`
        ([transport.md](transport.md#resumable-streams)). Must be shorter than `resume_window`.""",
    )
    resume_window: float = setting(
        60.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""How long a handshake-era stream whose client went away waits for a GET with `Last-Event-ID` to resume
        it. Meanwhile the request keeps running (a pending elicitation keeps waiting, and its answer may be POSTed);
        after it the request is given up as a disconnect (`ClientDisconnected`). A finished stream stays resumable this
        long too, and a standalone stream keeps its notifications.""",
    )
    stream_buffer_events: int = setting(
        256,
        kind="int",
        unit="events",
        check=checks.AT_LEAST_ONE,
        doc="""Events one stream keeps for replay; older ones are dropped, and resuming from before them gets 410.""",
    )
    stream_buffer_bytes: int = setting(
        1024 * 1024,
        kind="int",
        unit="bytes",
        note="1 MiB",
        check=checks.AT_LEAST_ONE,
        doc="""Bytes one stream keeps for replay (the last event is always kept, whatever its size); older events are
        dropped as above.""",
    )
    max_replay_bytes: int = setting(
        32 * 1024 * 1024,
        kind="int",
        unit="bytes",
        note="32 MiB",
        check=checks.AT_LEAST_ONE,
        doc="""Bytes the finished streams of the whole process keep for replay during their `resume_window`; beyond it
        the oldest are forgotten (resuming them gets 404). Streams of running requests are bounded by
        `stream_buffer_bytes` each and by the call budget in number.""",
    )
    stream_poll_interval: float = setting(
        0.0,
        kind="seconds",
        note="off",
        check=checks.SECONDS_OR_ZERO,
        doc="""When above 0, the server ends each connection of a handshake-era stream after this long (after a `retry`
        field; SSE polling, SEP-1699) and the client reconnects with `Last-Event-ID` to go on. For proxies or networks
        that cut long connections; it frees no thread under gunicorn, where a handler runs on its request's thread. `0`
        keeps a connection open until its stream ends.""",
    )
    max_body_bytes: int = setting(
        1024 * 1024,
        kind="int",
        unit="bytes",
        note="1 MiB",
        check=checks.AT_LEAST_ONE,
        doc="""The largest POST body accepted, chunked bodies included; larger gets 413. Over stdio, the longest line
        (newline not counted); a longer one gets -32600 and is skipped.""",
    )
    threads: int = setting(
        32,
        kind="int",
        unit="threads",
        check=checks.THREADS,
        doc="""gunicorn gthread threads per worker, and the size of zemcp's handler pool (used under WSGI servers other
        than gunicorn; under gunicorn a handler runs on its request's thread). At least 3. The thread reserve, the
        listen budget and the pending budget are derived from it.""",
    )
    workers: int = setting(
        1,
        kind="int",
        unit="processes",
        check=checks.AT_LEAST_ONE,
        doc="""gunicorn worker processes. Each has its own budgets (below), so N workers hold N times one worker's: new
        connections go to the least loaded worker, and with `ZEMCP_REDIS_URL` a worker whose busy connections fill its
        `pending_budget` hands a request to a sibling with room, connection and all
        ([deploy.md](deploy.md#capacity-n-workers-hold-n-times-the-budgets)). 2026-07-28 clients are served by any
        number of workers (they share the `requestState` key `gunicorn.conf.py` makes). Handshake-era clients with more
        than one worker need `ZEMCP_REDIS_URL`, which lets every worker serve every session: without it, sessions and
        pending elicitations live in the worker that created them, and the workers of one gunicorn share its listening
        socket, so a session's requests land on workers that do not know it; each such request gets 404 saying that the
        session belongs to another worker of this gunicorn and naming `ZEMCP_REDIS_URL`, and that worker logs a warning
        (at most once a minute). `gunicorn.conf.py` logs a warning at start-up when it is above 1 without
        `ZEMCP_REDIS_URL`. Without Redis, serve handshake-era clients with one worker, or with several gunicorn
        instances of one worker each behind a proxy that routes by `Mcp-Session-Id` (see `instance`). Listen streams
        are per process in either case.""",
    )
    endpoint: str = setting(
        "/mcp",
        kind="str",
        unit="URL path",
        check=checks.ENDPOINT,
        doc="""The path of the MCP endpoint; must start with `/`. `McpApp(server, endpoint=...)` overrides it for one
        app.""",
    )
    instance: str = setting(
        factory=lambda: secrets.token_hex(4),
        kind="str",
        unit="1-40 characters of `A-Z a-z 0-9 _ -`",
        shown="random (8 hex digits, new for every `Settings`; `gunicorn.conf.py` sets one in the master, "
        "so per gunicorn)",
        check=checks.INSTANCE,
        doc="""The name of this server instance. Every session id it creates starts with it:
        `<instance>.<worker>.<random>` (the worker tag names the process that created the session), so a proxy in front
        of several instances can send each request to the one named before the first `.`. A request for a session of
        another instance is answered 404 like any unknown session, and logs a warning about the routing mistake. The
        workers of one gunicorn share the name (the master sets `ZEMCP_INSTANCE` before it forks, when it is unset), so
        a worker tells a session of a sibling worker by its tag. Give each instance its own name. 2026-07-28 requests
        carry no session id and need no routing.""",
    )
    state_backend: str = setting(
        "auto",
        kind="str",
        unit="`auto`, `memory` or `redis`",
        check=checks.STATE_BACKEND,
        doc="""Where what sessions share is kept: sessions, the server-to-client requests waiting for answers, the
        streams' event logs and who hears a notification ([architecture.md](architecture.md#shared-state-the-seams)).
        `auto` means `redis` when `ZEMCP_REDIS_URL` is set and `memory` otherwise. `memory` keeps them in the process,
        needs no service and costs nothing; `redis` keeps them in the Redis of `ZEMCP_REDIS_URL`, so that every worker
        and instance serves every session ([deploy.md](deploy.md#many-workers-or-instances-with-redis)). An unknown
        name stops the server at start-up with the list of the known ones, and `redis` without `ZEMCP_REDIS_URL` with
        that hint.""",
    )
    redis_url: str = setting(
        "",
        kind="str",
        unit="`redis://[user:password@]host:port/db`, `rediss://...` (TLS) or `unix:///path.sock`",
        note="off",
        check=checks.REDIS_URL,
        secret=True,
        doc="""The Redis server that holds the shared state; needs `pip install '.[redis]'` (the `redis` package). Set
        on every worker and instance that serves the same clients, with the same `ZEMCP_REDIS_PREFIX`. Its user name
        and password are never logged or shown: messages name `redis://host:port/db` only. At start-up gunicorn's
        master logs once which Redis it is: `zemcp: shared state in Redis at redis://host:port/db (ZEMCP_REDIS_URL; any
        user name and password not shown), keys under 'zemcp:'`.""",
    )
    redis_prefix: str = setting(
        "zemcp:",
        kind="str",
        unit="1-64 characters of `A-Z a-z 0-9 _ . : -`",
        check=checks.REDIS_PREFIX,
        doc="""The start of every key and channel zemcp writes, so that several deployments can share one Redis
        database without seeing each other's sessions. Every key it writes has an expiry.""",
    )
    redis_timeout: float = setting(
        1.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""The longest wait for one Redis command, connecting included (a failed command is retried once, at once).
        A request that needs Redis while it does not answer gets 503 with `Retry-After: 2` and a JSON-RPC error naming
        Redis, after about twice this at most; 2026-07-28 requests, which need no session, are served meanwhile. A
        `subscriptions/listen` stream is acknowledged after this at most while its process does not yet hear the other
        processes' announcements.""",
    )
    request_state_key: tuple[str, ...] = setting(
        (),
        kind="list",
        unit="comma-separated secrets",
        note="a random key per process",
        check=checks.REQUEST_STATE_KEYS,
        secret=True,
        doc="""The secrets that seal the 2026-07-28 `requestState` (AES-256-GCM, each secret turned into a key with
        HKDF-SHA256). Each must be at least 32 characters; blanks around the commas are dropped. The first seals, every
        one opens, so keys can be rotated: put the new one first, and drop the old one once `elicitation_timeout` has
        passed ([deploy.md](deploy.md#the-requeststate-key)). Every process that may serve a round of the same request
        (all workers, instances and hosts) needs the same secrets, or it refuses the others' states. Empty: every
        process makes its own random key; `gunicorn.conf.py` sets one in the master before it forks, so that the
        workers of one gunicorn share it. Never shown in the `Settings` repr. Make one with `python -c 'import secrets;
        print(secrets.token_urlsafe(32))'`.""",
    )
    auth: str = setting(
        "off",
        kind="str",
        unit="`off`, `jwt` or `introspection`",
        check=checks.AUTH,
        doc="""Authorization ([security.md](security.md)). `off`: no tokens are asked for, so anyone who reaches the
        port may call every tool; keep such a server on loopback (binding elsewhere logs a warning at start-up). `jwt`:
        every request needs a JWT access token signed by a key of the authorization server's JWKS; `introspection`:
        every request's token is checked with the authorization server's RFC 7662 introspection endpoint. With either,
        the Protected Resource Metadata is served at `/.well-known/oauth-protected-resource<path of auth_resource>`,
        and sessions and `requestState` are bound to the token's principal.""",
    )
    auth_resource: str = setting(
        "",
        kind="str",
        unit="URL",
        shown="empty: `http://<bind><endpoint>`",
        doc="""This server's canonical URL, as clients reach it (`https://mcp.example.com/mcp` behind TLS or a proxy):
        the `resource` of the metadata, and the audience every token must be issued for (RFC 8707). No trailing
        slash.""",
    )
    auth_issuer: str = setting(
        "",
        kind="str",
        unit="URL",
        doc="""The authorization server's issuer, spelled exactly as its metadata spells it (clients compare character
        for character); listed in `authorization_servers` and required in JWTs' `iss`. Needed when `auth` is on.""",
    )
    auth_jwks_url: str = setting(
        "",
        kind="str",
        unit="URL",
        doc="""(`jwt`) The authorization server's `jwks_uri`. Keys without `kid` are ignored.""",
    )
    auth_algorithms: tuple[str, ...] = setting(
        ("RS256", "ES256"),
        kind="words",
        unit="comma- or space-separated",
        check=checks.WORDS,
        doc="""(`jwt`) Accepted signature algorithms, among RS/PS/ES 256/384/512 and EdDSA; `none` and the HMAC
        algorithms are refused at start-up.""",
    )
    auth_introspection_url: str = setting(
        "",
        kind="str",
        unit="URL",
        doc="""(`introspection`) The introspection endpoint.""",
    )
    auth_client_id: str = setting(
        "",
        kind="str",
        doc="""(`introspection`) This server's own client credentials at the authorization server, sent with HTTP Basic
        to the introspection endpoint. The secret is never shown in the `Settings` repr.""",
    )
    auth_client_secret: str = setting(
        "",
        kind="str",
        secret=True,
        shares_row=True,
        doc="",
    )
    auth_scopes: tuple[str, ...] = setting(
        (),
        kind="words",
        unit="space- or comma-separated",
        check=checks.WORDS,
        doc="""Scopes every request needs (403 `insufficient_scope` without them). Tools, prompts and resources can
        need more (`scopes=` at registration); the metadata's `scopes_supported` lists all of them. A granted `a`
        covers a needed `a:b`.""",
    )
    auth_leeway: float = setting(
        10.0,
        kind="seconds",
        check=checks.SECONDS_OR_ZERO,
        doc="""Clock skew allowed on a token's `exp` (and a JWT's `nbf`, `iat`).""",
    )
    auth_jwks_lifespan: float = setting(
        300.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""(`jwt`) How long a fetched JWKS is used before it is fetched again. The refresh runs in the background:
        tokens of the keys at hand are served meanwhile, and still while refreshes fail (a warning is logged each
        time); a successful refresh drops the keys it no longer lists.""",
    )
    auth_jwks_cooldown: float = setting(
        30.0,
        kind="seconds",
        check=checks.SECONDS_OR_ZERO,
        doc="""(`jwt`) A token whose `kid` is not in the cached JWKS makes zemcp fetch the JWKS again (the keys
        rotated), but only when the last fetch, the first one included, is older than this, so tokens with made-up key
        ids cannot make zemcp hammer the authorization server. A key published less than this after the last fetch is
        thus accepted only after the cooldown (or `auth_jwks_lifespan`) has passed: publish new keys ahead of using
        them. After a failed fetch, no fetch is tried for 1 s, then 2 s, 4 s ... after each further failure in a row,
        at most this long (at least 1 s).""",
    )
    auth_timeout: float = setting(
        5.0,
        kind="seconds",
        check=checks.POSITIVE_SECONDS,
        doc="""Bound on one request to the authorization server (JWKS fetch, introspection). JWKS fetches happen one at
        a time, each on a thread of its own, and hold no request whose token's key is known (pings need a token too):
        only the request whose unknown key started a fetch waits for it, this long at most (and a moment more); a token
        whose key is not known while a fetch is under way waits 0.25 s at most for it, and while fetching is backed off
        after a failure it is refused at once. Those requests get 503 with `Retry-After` (seconds until the next fetch
        may be tried, at least 1) and a message saying which; an introspection endpoint that cannot be reached gives
        503 with `Retry-After: 5`.""",
    )
    auth_introspection_cache: float = setting(
        30.0,
        kind="seconds",
        check=checks.SECONDS_OR_ZERO,
        doc="""(`introspection`) How long an active answer is reused for the same token (never past its `exp`; at most
        1,024 tokens, kept as SHA-256 digests); `0` asks on every request. A revoked token can thus be used this
        long.""",
    )

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

    @classmethod
    def from_site(cls, site: Mapping[str, Any], source: str, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from a site's configuration, then the ``ZEMCP_*`` variables over it.

        A deployment's environment wins over the site's code: the same ``ZEMCP_THREADS`` that
        sizes a plain server sizes a site's.

        Args:
            site: the site's configuration (Django's ``settings.ZEMCP``, Flask's
                ``app.config["ZEMCP"]``): the variables' names without ``ZEMCP_``, values as
                strings or as the Python values they stand for (``{"THREADS": 16}``).
            source: how the site names it, for messages (``settings.ZEMCP``).
            environ: the variables to read; ``os.environ`` when omitted.
        Returns:
            a validated :class:`Settings`.
        Raises:
            ValueError: a key names no setting, or a value does not parse or is out of range
                (the message names the key or variable and what is expected).
        """
        values = environment.read_mapping(cls, site, source)
        values.update(environment.read(cls, os.environ if environ is None else environ))
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
