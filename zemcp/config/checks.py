"""The checks of :class:`zemcp.config.Settings`: every value in range, normalized, explained when not.

Each raises ``ValueError`` with a message that names the setting, its variable where it has
one, and the form expected.
"""

from __future__ import annotations

import ipaddress
import math
import re
import threading
from typing import Any

from zemcp.config.rates import parse_rate, parse_tool_rates

_INSTANCE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_BACKEND = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_PREFIX = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
#: A URL path a request can name as it is: no query, fragment, space or percent-escape.
_URL_PATH = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@/-]*$")
_RATE_EXAMPLES = {"rate_limit": "120/minute", "rate_limit_tools": "report=5/minute,search=1/s"}


def check(settings: Any) -> None:
    """Validate and normalize a new ``Settings`` in place (tuples split, origins lowered).

    Raises:
        ValueError: a value is out of range or malformed.
    """
    positive = (
        "session_ttl",
        "elicitation_timeout",
        "keepalive_interval",
        "body_timeout",
        "head_timeout",
        "auth_timeout",
        "auth_jwks_lifespan",
        "stream_retry",
        "resume_window",
        "redis_timeout",
        "task_ttl",
        "task_poll_interval",
    )
    for name in positive:
        value = getattr(settings, name)
        # NaN compares false with everything and infinity overflows threading's waits.
        if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= threading.TIMEOUT_MAX):
            raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    for name in (
        "max_sessions",
        "max_pending_per_session",
        "max_body_bytes",
        "workers",
        "max_client_info_bytes",
        "stream_buffer_events",
        "stream_buffer_bytes",
        "max_replay_bytes",
        "task_threads",
        "max_tasks",
    ):
        if getattr(settings, name) < 1:
            raise ValueError(f"{name} must be at least 1, got {getattr(settings, name)!r}")
    share = settings.client_share
    if not (isinstance(share, (int, float)) and math.isfinite(share) and 0 < share <= 1):
        raise ValueError(
            f"client_share (ZEMCP_CLIENT_SHARE) must be above 0 and at most 1 (the fraction of each thread "
            f"budget one client may hold; 1 turns fair shares off), got {share!r}"
        )
    check_rates(settings)
    proxies = settings.forwarded_allow_ips
    proxies = tuple(p.strip() for p in proxies.split(",") if p.strip()) if isinstance(proxies, str) else proxies
    object.__setattr__(settings, "forwarded_allow_ips", tuple(proxies))
    for entry in (p for p in proxies if p != "*"):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(
                f"forwarded_allow_ips (ZEMCP_FORWARDED_ALLOW_IPS) takes comma-separated IP addresses, CIDR "
                f"networks such as 10.0.0.0/8, or *; got {entry!r}"
            ) from None
    check_observability(settings)
    object.__setattr__(settings, "log_format", str(settings.log_format).strip().lower())
    if settings.log_format not in ("text", "json"):
        raise ValueError(f"log_format (ZEMCP_LOG_FORMAT) must be text or json, got {settings.log_format!r}")
    if settings.threads < 3:
        raise ValueError(
            f"threads must be at least 3 (a waiting elicitation holds one thread and its "
            f"answer needs another), got {settings.threads!r}"
        )
    for name in ("max_listen_streams", "max_standalone_streams"):
        value = getattr(settings, name)
        if value is not None and not 0 <= value < settings.threads - 1:
            raise ValueError(
                f"{name} must be between 0 and threads - 2 ({settings.threads - 2}), so that a "
                f"pending elicitation and its answer still find threads, got {value!r}"
            )
    streams = settings.listen_budget + settings.standalone_budget
    if settings.max_pending is not None and not 1 <= settings.max_pending < settings.threads - streams:
        raise ValueError(
            f"max_pending must be between 1 and threads - listen_budget - standalone_budget - 1 "
            f"({settings.threads - streams - 1}) so that an answer POST always finds a free "
            f"thread, got {settings.max_pending!r}"
        )
    if settings.resume_window <= settings.stream_retry:
        raise ValueError(
            f"resume_window ({settings.resume_window:g} s) must be longer than stream_retry ({settings.stream_retry:g} s): "
            f"a client waits stream_retry before it comes back to resume"
        )
    if not _INSTANCE.match(settings.instance):
        raise ValueError(f"instance must be 1-40 characters of A-Z, a-z, 0-9, '_' and '-', got {settings.instance!r}")
    if not _BACKEND.match(settings.state_backend):
        raise ValueError(
            f"state_backend must name a state backend (a lowercase name such as 'memory'), got {settings.state_backend!r}"
        )
    check_redis(settings)
    if not settings.endpoint.startswith("/"):
        raise ValueError(f"endpoint must start with '/', got {settings.endpoint!r}")
    object.__setattr__(settings, "allowed_origins", tuple(o.rstrip("/").lower() for o in settings.allowed_origins))
    keys = settings.request_state_key
    # One secret given as a plain string in Python, as in the environment: split on commas.
    keys = tuple(k.strip() for k in keys.split(",") if k.strip()) if isinstance(keys, str) else tuple(keys)
    object.__setattr__(settings, "request_state_key", keys)
    for key in settings.request_state_key:
        if not isinstance(key, str) or len(key) < 32:
            raise ValueError(
                "request_state_key (ZEMCP_REQUEST_STATE_KEY) needs secrets of at least 32 characters "
                "each, comma-separated; make one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'"
            )
    check_auth(settings)


def check_rates(settings: Any) -> None:
    """The rate limits: each a rate of :mod:`zemcp.config.rates`, or empty; blanks around them dropped."""
    for name, parse in (("rate_limit", parse_rate), ("rate_limit_tools", parse_tool_rates)):
        source = f"{name} (ZEMCP_{name.upper()})"
        value = getattr(settings, name)
        if not isinstance(value, str):
            raise ValueError(f"{source} must be a string such as {_RATE_EXAMPLES[name]!r}, got {value!r}")
        object.__setattr__(settings, name, value.strip())
        if value.strip():
            parse(value, source)


def check_redis(settings: Any) -> None:
    """The Redis settings, and ``state_backend`` ``auto`` resolved by ``redis_url``."""
    url = settings.redis_url.strip()
    object.__setattr__(settings, "redis_url", url)
    if url and not url.startswith(("redis://", "rediss://", "unix://")):
        # Never echo the value: it may hold a password.
        raise ValueError(
            "redis_url (ZEMCP_REDIS_URL) must start with redis://, rediss:// (TLS) or unix://, "
            "for example redis://127.0.0.1:6379/0"
        )
    if not _PREFIX.match(settings.redis_prefix):
        raise ValueError(
            f"redis_prefix (ZEMCP_REDIS_PREFIX) must be 1-64 characters of A-Z, a-z, 0-9, '_', '.', ':' "
            f"and '-', got {settings.redis_prefix!r}"
        )
    if settings.state_backend == "auto":
        object.__setattr__(settings, "state_backend", "redis" if url else "memory")
    elif settings.state_backend == "redis" and not url:
        raise ValueError(
            "state_backend redis (ZEMCP_STATE_BACKEND) needs redis_url (ZEMCP_REDIS_URL), "
            "for example redis://127.0.0.1:6379/0"
        )


def check_auth(settings: Any) -> None:
    """The authorization settings: the mode, what it needs, the non-negative durations."""
    scopes = settings.auth_scopes
    if isinstance(scopes, str):
        scopes = scopes.replace(",", " ").split()
    object.__setattr__(settings, "auth_scopes", tuple(scopes))
    if isinstance(settings.auth_algorithms, str):
        object.__setattr__(settings, "auth_algorithms", tuple(settings.auth_algorithms.replace(",", " ").split()))
    for name in ("auth_leeway", "auth_jwks_cooldown", "auth_introspection_cache", "stream_poll_interval"):
        value = getattr(settings, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number of seconds, 0 or more, got {value!r}")
    if settings.auth not in ("off", "jwt", "introspection"):
        raise ValueError(f"auth (ZEMCP_AUTH) must be off, jwt or introspection, got {settings.auth!r}")
    if settings.auth == "off":
        return
    needed = {
        "jwt": ("auth_issuer", "auth_jwks_url"),
        "introspection": ("auth_issuer", "auth_introspection_url", "auth_client_id"),
    }[settings.auth]
    for name in needed:
        if not getattr(settings, name):
            raise ValueError(f"auth={settings.auth} needs {name} (ZEMCP_{name.upper()})")
    if settings.auth_resource == "" and settings.bind.startswith("unix:"):
        raise ValueError("auth on a unix socket needs auth_resource (ZEMCP_AUTH_RESOURCE): the URL clients use")


def check_observability(settings: Any) -> None:
    """The telemetry settings: ``otel``, the metrics path and who may read it."""
    object.__setattr__(settings, "otel", str(settings.otel).strip().lower())
    if settings.otel not in ("auto", "off"):
        raise ValueError(f"otel (ZEMCP_OTEL) must be auto or off, got {settings.otel!r}")
    path = settings.metrics_path.strip()
    path = path.rstrip("/") or path
    object.__setattr__(settings, "metrics_path", path)
    if path and (not _URL_PATH.match(path) or path == settings.endpoint.rstrip("/")):
        raise ValueError(
            f"metrics_path (ZEMCP_METRICS_PATH) must be a URL path starting with '/' other than the MCP "
            f"endpoint, such as /metrics, got {path!r}"
        )
    allow = settings.metrics_allow
    allow = tuple(a.strip() for a in allow.split(",") if a.strip()) if isinstance(allow, str) else tuple(allow)
    object.__setattr__(settings, "metrics_allow", allow)
    for entry in allow:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(
                f"metrics_allow (ZEMCP_METRICS_ALLOW) takes comma-separated IP addresses or CIDR networks "
                f"such as 10.0.0.0/8, got {entry!r}"
            ) from None
