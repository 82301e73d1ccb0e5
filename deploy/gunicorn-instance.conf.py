"""gunicorn settings for one zemcp instance behind the proxies of deploy/.

Run one gunicorn per instance, each with its own name and loopback port (the systemd unit
deploy/zemcp@.service does this)::

    ZEMCP_INSTANCE=a ZEMCP_BIND=127.0.0.1:8001 gunicorn -c deploy/gunicorn-instance.conf.py wsgi:app

Every instance also needs the same ``ZEMCP_REQUEST_STATE_KEY`` (the 2026-07-28 requestState
key): this file refuses to start without it. Everything else comes from the repository's
gunicorn.conf.py (gthread, the thread budget, the hooks, logging); this file only changes
what a proxy in front needs.
"""

import importlib.util
import os
from pathlib import Path

from gunicorn.config import KNOWN_SETTINGS

import zemcp

#: [seconds] the proxies' limit on silence from an instance: nginx ``proxy_read_timeout``,
#: HAProxy ``timeout server`` and ``timeout client`` in deploy/. Keep in step with them.
PROXY_READ_TIMEOUT = 60
#: [seconds] how long the proxies keep an idle connection to an instance for reuse: nginx
#: ``keepalive_timeout`` in the upstreams of deploy/nginx.conf.
PROXY_UPSTREAM_IDLE = 60

# Checked before the base configuration runs, which would make up a key of this instance's own.
if not os.environ.get("ZEMCP_REQUEST_STATE_KEY", "").strip():
    raise ValueError(
        "ZEMCP_REQUEST_STATE_KEY is not set: behind a proxy the rounds of a 2026-07-28 request may "
        "reach different instances, and each must open the requestState another sealed. Give every "
        "instance the same key(s), e.g. in /etc/zemcp/zemcp.env; make one with: python -c "
        "'import secrets; print(secrets.token_urlsafe(32))'"
    )
# Checked before the base configuration runs too, which would make up a name of its own.
if not os.environ.get("ZEMCP_INSTANCE", "").strip():
    raise ValueError(
        "ZEMCP_INSTANCE is not set: behind a proxy every instance needs a fixed name "
        "(1-40 characters of A-Za-z0-9_-) that the nginx map and the logs refer to"
    )

# The proxies in deploy/ run on this host and pass the client's address in X-Forwarded-For:
# believe them, so that each client behind them gets its own fair share of the threads.
os.environ.setdefault("ZEMCP_FORWARDED_ALLOW_IPS", "127.0.0.1,::1")

_base_path = Path(__file__).resolve().parent.parent / "gunicorn.conf.py"
_spec = importlib.util.spec_from_file_location("zemcp_gunicorn_base", _base_path)
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
# gunicorn reads the settings (and hooks) it knows from this module's names.
globals().update({s.name: getattr(_base, s.name) for s in KNOWN_SETTINGS if hasattr(_base, s.name)})

_settings = zemcp.Settings.from_env()
if _settings.keepalive_interval * 2 > PROXY_READ_TIMEOUT:
    raise ValueError(
        f"ZEMCP_KEEPALIVE_INTERVAL={_settings.keepalive_interval:g} is too long for the proxies' "
        f"{PROXY_READ_TIMEOUT} s read timeout: keep it at most {PROXY_READ_TIMEOUT / 2:g} s, or raise "
        f"the timeouts in deploy/ and PROXY_READ_TIMEOUT here together"
    )

# One process per instance: its name is the routing key, and two processes under one name
# could not be told apart by the proxy.
workers = 1
# Longer than the proxies keep idle upstream connections, so the proxy always closes an
# idle connection first and never sends a request on one gunicorn is just closing (that
# race shows up as sporadic 502s; nginx does not retry a POST).
keepalive = PROXY_UPSTREAM_IDLE + 15
