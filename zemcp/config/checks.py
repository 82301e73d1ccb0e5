"""The checks of :class:`zemcp.config.Settings`: every value in range, normalized, explained when not.

A setting's own rule is a :class:`~zemcp.config.declaration.Check` named in its declaration;
the rules between settings (budgets derived from ``threads``, what a mode needs) are
:func:`check`'s. Each raises ``ValueError`` with a message that names the setting, its
variable where it has one, and the form expected.
"""

from __future__ import annotations

import ipaddress
import math
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from zemcp.config.declaration import Check, declarations
from zemcp.config.rates import Rate, parse_rate, parse_tool_rates

_INSTANCE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_BACKEND = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_PREFIX = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
#: A URL path a request can name as it is: no query, fragment, space or percent-escape.
_URL_PATH = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@/-]*$")

#: The rules :func:`check` applies between settings, as the reference states them.
RULES_BETWEEN_SETTINGS = (
    "`max_listen_streams` and `max_standalone_streams`, when set, between 0 and `threads - 2`, so that a "
    "pending elicitation and its answer still find threads.",
    "`max_pending`, when set, between 1 and `threads - listen_budget - standalone_budget - 1`, so that "
    "pending elicitations and push streams together can never take every thread from the answer POSTs "
    "(long-running tool calls that do not elicit are not capped and can still fill the threads).",
    "`resume_window` longer than `stream_retry` (a client waits `stream_retry` before it comes back to resume).",
    "`metrics_path` other than the MCP endpoint.",
    "`state_backend` `redis` needs `redis_url`.",
    "`auth` `jwt` needs `auth_issuer` and `auth_jwks_url`, `introspection` needs `auth_issuer`, "
    "`auth_introspection_url` and `auth_client_id`; on a unix socket either needs `auth_resource`.",
)


def _positive_seconds(name: str, value: Any) -> Any:
    # NaN compares false with everything and infinity overflows threading's waits.
    if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= threading.TIMEOUT_MAX):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return value


def _seconds_or_zero(name: str, value: Any) -> Any:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number of seconds, 0 or more, got {value!r}")
    return value


def _at_least_one(name: str, value: Any) -> Any:
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value!r}")
    return value


def _threads(name: str, value: Any) -> Any:
    if value < 3:
        raise ValueError(
            f"threads must be at least 3 (a waiting elicitation holds one thread and its "
            f"answer needs another), got {value!r}"
        )
    return value


def _client_share(name: str, share: Any) -> Any:
    if not (isinstance(share, (int, float)) and math.isfinite(share) and 0 < share <= 1):
        raise ValueError(
            f"client_share (ZEMCP_CLIENT_SHARE) must be above 0 and at most 1 (the fraction of each thread "
            f"budget one client may hold; 1 turns fair shares off), got {share!r}"
        )
    return share


def _rates(example: str, parse: Callable[[str, str], Rate | dict[str, Rate]]) -> Callable[[str, Any], Any]:
    def run(name: str, value: Any) -> Any:
        source = f"{name} (ZEMCP_{name.upper()})"
        if not isinstance(value, str):
            raise ValueError(f"{source} must be a string such as {example!r}, got {value!r}")
        if value.strip():
            parse(value, source)
        return value.strip()

    return run


def _split_commas(value: Any) -> tuple[Any, ...]:
    # One string given in Python, as in the environment: split on commas.
    return tuple(part.strip() for part in value.split(",") if part.strip()) if isinstance(value, str) else tuple(value)


def _proxies(name: str, value: Any) -> Any:
    proxies = _split_commas(value)
    for entry in (p for p in proxies if p != "*"):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(
                f"forwarded_allow_ips (ZEMCP_FORWARDED_ALLOW_IPS) takes comma-separated IP addresses, CIDR "
                f"networks such as 10.0.0.0/8, or *; got {entry!r}"
            ) from None
    return proxies


def _networks(name: str, value: Any) -> Any:
    allow = _split_commas(value)
    for entry in allow:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(
                f"metrics_allow (ZEMCP_METRICS_ALLOW) takes comma-separated IP addresses or CIDR networks "
                f"such as 10.0.0.0/8, got {entry!r}"
            ) from None
    return allow


def _word_of(*words: str, lowered: bool = True) -> Callable[[str, Any], Any]:
    expected = f"{', '.join(words[:-1])} or {words[-1]}"

    def run(name: str, value: Any) -> Any:
        if lowered:
            value = str(value).strip().lower()
        if value not in words:
            raise ValueError(f"{name} (ZEMCP_{name.upper()}) must be {expected}, got {value!r}")
        return value

    return run


def _metrics_path(name: str, value: Any) -> Any:
    path = value.strip()
    path = path.rstrip("/") or path
    if path and not _URL_PATH.match(path):
        raise _metrics_path_error(path)
    return path


def _metrics_path_error(path: str) -> ValueError:
    return ValueError(
        f"metrics_path (ZEMCP_METRICS_PATH) must be a URL path starting with '/' other than the MCP "
        f"endpoint, such as /metrics, got {path!r}"
    )


def _instance(name: str, value: Any) -> Any:
    if not _INSTANCE.match(value):
        raise ValueError(f"instance must be 1-40 characters of A-Z, a-z, 0-9, '_' and '-', got {value!r}")
    return value


def _state_backend(name: str, value: Any) -> Any:
    if not _BACKEND.match(value):
        raise ValueError(f"state_backend must name a state backend (a lowercase name such as 'memory'), got {value!r}")
    return value


def _redis_url(name: str, value: Any) -> Any:
    url = value.strip()
    if url and not url.startswith(("redis://", "rediss://", "unix://")):
        # Never echo the value: it may hold a password.
        raise ValueError(
            "redis_url (ZEMCP_REDIS_URL) must start with redis://, rediss:// (TLS) or unix://, "
            "for example redis://127.0.0.1:6379/0"
        )
    return url


def _redis_prefix(name: str, value: Any) -> Any:
    if not _PREFIX.match(value):
        raise ValueError(
            f"redis_prefix (ZEMCP_REDIS_PREFIX) must be 1-64 characters of A-Z, a-z, 0-9, '_', '.', ':' "
            f"and '-', got {value!r}"
        )
    return value


def _endpoint(name: str, value: Any) -> Any:
    if not value.startswith("/"):
        raise ValueError(f"endpoint must start with '/', got {value!r}")
    return value


def _origins(name: str, value: Any) -> Any:
    origins = tuple(origin.rstrip("/").lower() for origin in value)
    for origin in origins:
        # What a browser sends in Origin (RFC 6454): a scheme, "://", a host, perhaps a port.
        parts = urlsplit(origin)
        if not (parts.scheme and parts.netloc and origin == f"{parts.scheme}://{parts.netloc}"):
            raise ValueError(
                f"{name} (ZEMCP_{name.upper()}) takes origins of the form scheme://host[:port], as browsers send "
                f"them in Origin (https://app.example.com), got {origin!r}"
            )
    return origins


def _request_state_keys(name: str, value: Any) -> Any:
    keys = _split_commas(value)
    for key in keys:
        if not isinstance(key, str) or len(key) < 32:
            raise ValueError(
                "request_state_key (ZEMCP_REQUEST_STATE_KEY) needs secrets of at least 32 characters "
                "each, comma-separated; make one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'"
            )
    return keys


def _words(name: str, value: Any) -> Any:
    return tuple(value.replace(",", " ").split()) if isinstance(value, str) else tuple(value)


POSITIVE_SECONDS = Check("a positive, finite number of seconds", _positive_seconds)
SECONDS_OR_ZERO = Check("a finite number of seconds, 0 or more", _seconds_or_zero)
AT_LEAST_ONE = Check("at least 1", _at_least_one)
THREADS = Check("at least 3 (a waiting elicitation holds one thread and its answer needs another)", _threads)
CLIENT_SHARE = Check("above 0 and at most 1", _client_share)
RATE = Check("a rate as above (the message shows the form), or empty", _rates("120/minute", parse_rate))
TOOL_RATES = Check(
    "`<tool>=<rate>` pairs, each rate as above, or empty", _rates("report=5/minute,search=1/s", parse_tool_rates)
)
PROXIES = Check("IP addresses or CIDR networks, or `*`", _proxies)
NETWORKS = Check("IP addresses or CIDR networks", _networks)
OTEL = Check("`auto` or `off`, in any case", _word_of("auto", "off"))
LOG_FORMAT = Check("`text` or `json`, in any case", _word_of("text", "json"))
AUTH = Check("`off`, `jwt` or `introspection`", _word_of("off", "jwt", "introspection", lowered=False))
METRICS_PATH = Check("a URL path starting with `/` (a trailing `/` is dropped), or empty", _metrics_path)
INSTANCE = Check("1 to 40 characters of `A-Z`, `a-z`, `0-9`, `_` and `-`", _instance)
STATE_BACKEND = Check(
    "a lowercase name (a name no backend has stops the server at start-up, naming the known ones)", _state_backend
)
REDIS_URL = Check("empty or starting with `redis://`, `rediss://` or `unix://` (never shown in messages)", _redis_url)
REDIS_PREFIX = Check("1 to 64 characters of `A-Z`, `a-z`, `0-9`, `_`, `.`, `:` and `-`", _redis_prefix)
ENDPOINT = Check("starting with `/`", _endpoint)
ORIGINS = Check("origins of the form `scheme://host[:port]` (a trailing slash is dropped)", _origins)
REQUEST_STATE_KEYS = Check(
    "secrets of at least 32 characters each (the message says how to make one, and never shows the secret)",
    _request_state_keys,
)
WORDS = Check("", _words)


def check(settings: Any) -> None:
    """Validate and normalize a new ``Settings`` in place: each setting by its own declared
    :class:`~zemcp.config.declaration.Check`, in the order of the fields, then the rules
    between settings (:data:`RULES_BETWEEN_SETTINGS`).

    Raises:
        ValueError: a value is out of range or malformed; the message names the field and its
            variable (``session_ttl (ZEMCP_SESSION_TTL) must be ...``).
    """
    for name, (_, declaration) in declarations(type(settings)).items():
        if declaration.check is not None:
            try:
                value = declaration.check.run(name, getattr(settings, name))
            except ValueError as exc:
                raise ValueError(_named(name, str(exc))) from None
            object.__setattr__(settings, name, value)
    for name in ("max_listen_streams", "max_standalone_streams"):
        value = getattr(settings, name)
        if value is not None and not 0 <= value < settings.threads - 1:
            raise ValueError(
                _named(name, f"{name} must be between 0 and threads - 2 ({settings.threads - 2}), so that a ")
                + f"pending elicitation and its answer still find threads, got {value!r}"
            )
    streams = settings.listen_budget + settings.standalone_budget
    if settings.max_pending is not None and not 1 <= settings.max_pending < settings.threads - streams:
        raise ValueError(
            "max_pending (ZEMCP_MAX_PENDING) must be between 1 and threads - listen_budget - standalone_budget - 1 "
            f"({settings.threads - streams - 1}) so that an answer POST always finds a free "
            f"thread, got {settings.max_pending!r}"
        )
    if settings.resume_window <= settings.stream_retry:
        raise ValueError(
            f"resume_window (ZEMCP_RESUME_WINDOW, {settings.resume_window:g} s) must be longer than stream_retry "
            f"(ZEMCP_STREAM_RETRY, {settings.stream_retry:g} s): "
            f"a client waits stream_retry before it comes back to resume"
        )
    if settings.metrics_path and settings.metrics_path == settings.endpoint.rstrip("/"):
        raise _metrics_path_error(settings.metrics_path)
    if settings.state_backend == "auto":
        object.__setattr__(settings, "state_backend", "redis" if settings.redis_url else "memory")
    elif settings.state_backend == "redis" and not settings.redis_url:
        raise ValueError(
            "state_backend redis (ZEMCP_STATE_BACKEND) needs redis_url (ZEMCP_REDIS_URL), "
            "for example redis://127.0.0.1:6379/0"
        )
    check_auth(settings)


def check_auth(settings: Any) -> None:
    """What the authorization mode needs: its servers' URLs, and ``auth_resource`` on a unix socket."""
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


def _named(name: str, message: str) -> str:
    """``message``, which begins with the field ``name``, with its variable after the name
    (``threads (ZEMCP_THREADS) must be ...``), unless it names the variable already."""
    variable = f"ZEMCP_{name.upper()}"
    if variable in message or not message.startswith(name + " "):
        return message
    return f"{name} ({variable}){message[len(name) :]}"
