"""The suite's fixtures and hooks, registered from the modules of tests/support that hold them.

* tests/support/gunicorn.py: gunicorn serving zemcp (``start_server``, ``server``, ``client``,
  ``start_traced_server``, ``traced_server``, ``_log_dir``), and its log in failure reports.
* tests/support/redisserver.py: a real redis-server (``redis_server``, ``start_redis``).
* tests/support/node.py: the official TypeScript clients and the MCP Inspector on Node 22
  (``ts_sdk1_modules``, ``node_modules``, ``inspector_modules``).
* tests/support/stacks.py: zemcp instances behind HAProxy or nginx (``stack``, ``start_stack``).
* tests/support/browser.py: headless Chromium and a page on another origin (``chromium``,
  ``page_server``).
* tests/support/apphost.py: a real MCP Apps host page and its View, bundled from the official
  npm packages (``apphost_modules``, ``app_host``); tests/support/sdkapps.py: the official Python
  SDK's MCP Apps server (``sdk_apps_url``); tests/support/zemcpapps.py: zemcp's, with the same
  declarations (``zemcp_apps_url``).
* tests/support/oauth_server.py: an OAuth authorization server (``oauth_server``).
* tests/support/postgres.py: a real PostgreSQL cluster of the tests' own (``postgres``).
* tests/support/djangosite.py: the test Django project on it (``django_project_db``, ``notes_site``).
* tests/support/markers.py: marks each test with what it needs (``gunicorn``, ``redis``,
  ``node``, ``browser``, ``proxy``, ``postgres``); ``slow`` is written on the test.

The clients of both protocol eras, over HTTP or in process, are in tests/support/clients.py
(docs/contributing.md).
"""

pytest_plugins = [
    "tests.support.gunicorn",
    "tests.support.redisserver",
    "tests.support.node",
    "tests.support.stacks",
    "tests.support.browser",
    "tests.support.apphost",
    "tests.support.sdkapps",
    "tests.support.zemcpapps",
    "tests.support.oauth_server",
    "tests.support.postgres",
    "tests.support.djangosite",
    "tests.support.markers",
]
