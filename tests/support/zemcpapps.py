"""zemcp's MCP Apps server (tests/apps/zemcp_weather.py) under gunicorn on a free loopback port.

Fixtures:
    zemcp_apps_url: the ``/mcp`` URL of that server, serving the test View (tests/support/apphost.py)
        as its weather card and admitting the host page's origin (``ZEMCP_ALLOWED_ORIGINS``);
        stopped after the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.apps.sdk_weather import REFRESH_TOOL
from tests.apps.zemcp_weather import CARD_VARIABLE
from tests.support.apphost import AppHost


@pytest.fixture
def zemcp_apps_url(app_host: AppHost, start_server, tmp_path: Path) -> str:
    """zemcp's weather server with the test View as its card, under gunicorn: its ``/mcp`` URL."""
    card = tmp_path / "card.html"
    card.write_text(app_host.app_html(REFRESH_TOOL), encoding="utf-8")
    server = start_server(
        app="tests.apps.zemcp_weather:create_app()",
        environ={CARD_VARIABLE: str(card)},
        allowed_origins=app_host.origin,
    )
    return server.url
