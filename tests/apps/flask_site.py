"""A Flask site with the reference server mounted under ``/mcp`` (``tests.apps.flask_site:app``).

It follows the README's "Mounting in Flask or Django" pattern: werkzeug's
``DispatcherMiddleware`` in front of Flask's own ``wsgi_app``, and the ``McpApp`` given
``endpoint="/"`` because the middleware moves the prefix out of the path. The site has one
page of its own and an ``after_request`` hook that marks its responses, so that a test can
tell which requests Flask served.
"""

from flask import Flask
from werkzeug.middleware.dispatcher import DispatcherMiddleware

import zemcp
from wsgi import create_app

#: Response header the site's hook adds to every response Flask itself serves.
SITE_HEADER = "X-Served-By"

app = Flask(__name__)


@app.get("/")
def index() -> str:
    """The site's own page."""
    return "the flask site"


@app.after_request
def mark(response):
    """Mark the response as Flask's: the mounted MCP app's responses never pass through here."""
    response.headers[SITE_HEADER] = "flask"
    return response


app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/mcp": zemcp.McpApp(create_app().server, endpoint="/")})
