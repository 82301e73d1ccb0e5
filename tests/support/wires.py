"""How a test client's requests reach the server: the wires of tests/support/clients.py.

* :class:`HttpWire`: ``requests`` over loopback TCP, to a real server (gunicorn, a proxy in
  front of some, ``zemcp run``).
* :class:`InProcessWire`: werkzeug's test client, calling the WSGI app in the test's own
  process. werkzeug gives the app no socket, so zemcp answers through its reply pool
  (``ReplySink``, zemcp/replies/pool.py).
* :class:`DirectWire`: a socket pair per connection, whose server end is served the way
  gunicorn's gthread worker serves a connection, in the test's own process: the environ
  carries the socket, so zemcp writes to it directly (``DirectSink``, zemcp/replies/direct.py),
  as it does in production under gunicorn.

A wire returns responses of its own type: ``requests.Response``, werkzeug's ``TestResponse``
or :class:`DirectResponse`. All three have ``status_code`` and ``headers`` (whose ``get``
ignores case); :meth:`Wire.json` reads a body as JSON and :meth:`Wire.open` gives an event
stream as a :class:`~tests.support.sse.SseStream`. Request headers are a mapping in which
None leaves a header out (over HTTP, one ``requests`` would add too).
"""

from __future__ import annotations

import abc
import errno
import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gunicorn.config import Config
from gunicorn.http import wsgi as gunicorn_wsgi
from gunicorn.http.errors import NoMoreData
from gunicorn.http.parser import RequestParser
from werkzeug import test as werkzeug_test

from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT, http_session
from tests.support.sse import SseStream

#: Request headers: a value of None leaves the header out.
Headers = Mapping[str, "str | None"]


def is_event_stream(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` value is ``text/event-stream`` (parameters aside)."""
    return (content_type or "").startswith("text/event-stream")


class Wire(abc.ABC):
    """The way to one server's MCP endpoint.

    Attributes:
        url: the endpoint as a URL or, in process, as a path.
    """

    url: str

    @abc.abstractmethod
    def send(
        self,
        method: str,
        headers: Headers,
        body: bytes | None = None,
        *,
        own: bool = False,
        timeout: float = READ_TIMEOUT,
    ) -> Any:
        """One request, its response read in full.

        Args:
            method: the HTTP method.
            headers: the request's headers (None leaves one out).
            body: the request's body, if any.
            own: on a connection of its own, closed after the response (the in-process wires
                open one per request anyway).
            timeout: [seconds] the longest wait for the response (over HTTP: each read).

        Returns:
            the wire's response.
        """

    @abc.abstractmethod
    def open(
        self, method: str, headers: Headers, body: bytes | None = None, *, timeout: float = READ_TIMEOUT
    ) -> tuple[Any, SseStream | None]:
        """One request on a connection of its own, returned once the response's head arrived.

        Returns:
            the wire's response and, when it is ``text/event-stream``, a reader of its body
            (closing the reader closes the connection); otherwise the body is read in full,
            the connection closed, and the reader is None.
        """

    @abc.abstractmethod
    def json(self, response: Any) -> Any:
        """The body of ``response`` (of this wire) parsed as JSON."""

    @abc.abstractmethod
    def text(self, response: Any) -> str:
        """The body of ``response`` (of this wire) as text, for messages and checks of its words."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connections the wire keeps, and check what it must check at the end."""


def _present(headers: Headers) -> dict[str, str]:
    return {key: value for key, value in headers.items() if value is not None}


# -- over HTTP --------------------------------------------------------------------------------


class HttpWire(Wire):
    """``requests`` to ``url`` over loopback TCP.

    Plain requests share one kept-alive connection (``http``); :meth:`open` and ``own``
    requests each get a connection of their own, so that an answer POST travels on another
    connection than the stream it answers, and closing a stream really closes its socket.

    Attributes:
        url: the endpoint (``http://127.0.0.1:<port>/mcp``); a test may point it elsewhere.
        source: the loopback address it connects from (None: the system's choice, 127.0.0.1).
        http: the session of the plain requests; a test may replace it with a connection it
            placed on a chosen worker.
    """

    def __init__(self, url: str, source: str | None = None):
        self.url = url
        self.source = source
        self.http = http_session(source)

    def send(
        self,
        method: str,
        headers: Headers,
        body: bytes | None = None,
        *,
        own: bool = False,
        timeout: float = READ_TIMEOUT,
    ) -> Any:
        """See :meth:`Wire.send`; returns a ``requests.Response``."""
        if not own:
            return self.http.request(
                method, self.url, data=body, headers=dict(headers), timeout=(CONNECT_TIMEOUT, timeout)
            )
        with http_session(self.source) as http:
            response = http.request(
                method, self.url, data=body, headers=dict(headers), timeout=(CONNECT_TIMEOUT, timeout)
            )
            _ = response.content
        return response

    def open(
        self, method: str, headers: Headers, body: bytes | None = None, *, timeout: float = READ_TIMEOUT
    ) -> tuple[Any, SseStream | None]:
        """See :meth:`Wire.open`; returns a ``requests.Response`` (streamed)."""
        http = http_session(self.source)
        response = http.request(
            method, self.url, data=body, headers=dict(headers), timeout=(CONNECT_TIMEOUT, timeout), stream=True
        )
        if is_event_stream(response.headers.get("Content-Type")):
            return response, SseStream.from_requests(response, http)
        _ = response.content  # read it all, then free the connection
        http.close()
        return response, None

    def json(self, response: Any) -> Any:
        """See :meth:`Wire.json`."""
        return response.json()

    def text(self, response: Any) -> str:
        """See :meth:`Wire.text`; an event stream is UTF-8 (WHATWG HTML, "Server-sent events"),
        which requests would read as Latin-1 without a ``charset``."""
        if is_event_stream(response.headers.get("Content-Type")):
            return response.content.decode("utf-8", "replace")
        return response.text

    def close(self) -> None:
        """Close the kept-alive connection."""
        self.http.close()


# -- in process: werkzeug's test client -----------------------------------------------------


class ThreadedClient(werkzeug_test.Client):
    """``werkzeug.test.Client`` whose requests carry ``wsgi.multithread: True``.

    werkzeug's client marks its requests ``wsgi.multithread: False`` (it calls the app in the
    caller's thread), and zemcp then refuses to wait for an elicitation answer that a
    single-threaded server could never deliver. The tests do deliver answers, from other
    threads, as gunicorn's gthread worker would: this client says so on every request.
    """

    def open(self, *args: Any, **kwargs: Any) -> Any:
        """``werkzeug.test.Client.open``, with ``wsgi.multithread`` true unless ``environ_overrides`` says otherwise."""
        kwargs["environ_overrides"] = {"wsgi.multithread": True, **(kwargs.get("environ_overrides") or {})}
        return super().open(*args, **kwargs)


class InProcessWire(Wire):
    """werkzeug's test client calling ``app`` in this process, one client per request.

    Args:
        app: the WSGI application (a ``zemcp.McpApp``, or a host app that mounts one).
        path: the MCP endpoint's path.
        remote_addr: the client address the app sees (``REMOTE_ADDR``); werkzeug's default
            when None.
        multithread: False marks the requests ``wsgi.multithread: False``, as a server that
            serves one request at a time does (see :class:`ThreadedClient`).

    Attributes:
        app, path, remote_addr, multithread: as given; ``url`` is ``path``.
    """

    def __init__(
        self, app: Callable[..., Any], path: str = "/mcp", remote_addr: str | None = None, *, multithread: bool = True
    ):
        self.app = app
        self.path = path
        self.url = path
        self.remote_addr = remote_addr
        self.multithread = multithread

    def raw(self, method: str, path: str | None = None, **kwargs: Any) -> Any:
        """A request built from werkzeug's own arguments (``headers`` as a list of pairs to repeat
        one, ``data``, ``input_stream``, ``environ_overrides``, ``buffered``...), for what a
        client would not send: bad headers, short bodies, other paths.

        Returns:
            werkzeug's ``TestResponse``.
        """
        overrides: dict[str, Any] = {"wsgi.multithread": self.multithread}
        if self.remote_addr is not None:
            overrides["REMOTE_ADDR"] = self.remote_addr
        kwargs["environ_overrides"] = {**overrides, **(kwargs.get("environ_overrides") or {})}
        return ThreadedClient(self.app).open(path or self.path, method=method, **kwargs)

    def send(
        self,
        method: str,
        headers: Headers,
        body: bytes | None = None,
        *,
        own: bool = False,
        timeout: float = READ_TIMEOUT,
    ) -> Any:
        """See :meth:`Wire.send`; returns werkzeug's ``TestResponse`` (the app runs to the end of
        the response in this thread, so ``timeout`` does not apply)."""
        return self.raw(method, headers=_present(headers), data=body)

    def open(
        self, method: str, headers: Headers, body: bytes | None = None, *, timeout: float = READ_TIMEOUT
    ) -> tuple[Any, SseStream | None]:
        """See :meth:`Wire.open`; returns werkzeug's ``TestResponse``, unbuffered. Closing the
        reader closes the response's iterable, as a WSGI server does when its client goes."""
        response = self.raw(method, headers=_present(headers), data=body, buffered=False)
        if is_event_stream(response.headers.get("Content-Type")):
            return response, SseStream(iter(response.response), response.close)
        response.get_data()
        response.close()
        return response, None

    def json(self, response: Any) -> Any:
        """See :meth:`Wire.json`."""
        return response.get_json()

    def close(self) -> None:
        """Nothing to close: every request had a client of its own."""

    def text(self, response: Any) -> str:
        """See :meth:`Wire.text`."""
        return response.get_data(as_text=True)


# -- in process: the direct-write path ------------------------------------------------------

#: gunicorn's default settings: what its request parser and its Response read.
GUNICORN = Config()
#: The addresses gunicorn would report for the client and the listener (a socket pair has none).
CLIENT_ADDRESS = ("127.0.0.1", 50000)
LISTENER_ADDRESS = ("127.0.0.1", 8000)
#: [seconds] the longest a read, a wait for a message or the end of a serving thread may take.
DIRECT_TIMEOUT = 5.0
#: The errors of a client that went away, which gunicorn ignores too.
CLIENT_GONE = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN)


class DirectResponse:
    """One HTTP response read on the client's end of a socket pair.

    Attributes:
        status_code: the HTTP status.
        headers: the response headers (``http.client.HTTPMessage``; ``get`` ignores case).
        content: the whole body once read (by :meth:`DirectWire.send`), else None.
        thread: the name of the thread that serves the connection (a direct handler runs on it).
    """

    def __init__(self, response: http.client.HTTPResponse, thread: str):
        self.status_code = response.status
        self.headers = response.headers
        self.content: bytes | None = None
        self.thread = thread


class DirectWire(Wire):
    """Connections to ``app``, each over a socket pair whose server end is served on a thread
    of its own as gunicorn's gthread worker serves a connection (``gunicorn/workers/gthread.py``,
    ``handle_request``): gunicorn's request parser, its ``wsgi.create`` environ (which carries the
    socket as ``gunicorn.socket``), ``wsgi.multithread`` true, and its ``Response`` writing
    HTTP/1.1. zemcp then writes directly, on the serving thread. The client's end is read with
    ``http.client``; every read waits :data:`DIRECT_TIMEOUT` at most.

    Attributes:
        url: the endpoint as gunicorn would see it (``http://127.0.0.1:8000/mcp``).
        errors: what a serving thread raised other than a client that went away.
    """

    def __init__(self, app: Callable[..., Any]):
        self._app = app
        self.url = f"http://{LISTENER_ADDRESS[0]}:{LISTENER_ADDRESS[1]}/mcp"
        self._threads: list[threading.Thread] = []
        self._connections: list[http.client.HTTPConnection] = []
        self.errors: list[BaseException] = []

    def _request(
        self, method: str, headers: Headers, body: bytes | None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, str]:
        ours, theirs = socket.socketpair()
        ours.settimeout(DIRECT_TIMEOUT)
        thread = threading.Thread(
            target=self._serve, args=(theirs,), name=f"direct-wire-{len(self._threads)}", daemon=True
        )
        thread.start()
        self._threads.append(thread)
        connection = http.client.HTTPConnection(LISTENER_ADDRESS[0], LISTENER_ADDRESS[1], timeout=DIRECT_TIMEOUT)
        connection.sock = ours
        self._connections.append(connection)
        connection.request(method, "/mcp", body=body, headers=_present(headers))
        return connection, connection.getresponse(), thread.name

    def send(
        self,
        method: str,
        headers: Headers,
        body: bytes | None = None,
        *,
        own: bool = False,
        timeout: float = READ_TIMEOUT,
    ) -> DirectResponse:
        """See :meth:`Wire.send`: a new connection per request, closed once the body was read."""
        connection, response, thread = self._request(method, headers, body)
        try:
            reply = DirectResponse(response, thread)
            reply.content = response.read()
            return reply
        finally:
            response.close()
            connection.close()

    def open(
        self, method: str, headers: Headers, body: bytes | None = None, *, timeout: float = READ_TIMEOUT
    ) -> tuple[DirectResponse, SseStream | None]:
        """See :meth:`Wire.open`. The stream's :meth:`~tests.support.sse.SseStream.next_message`
        fails when only keep-alive comments came for :data:`DIRECT_TIMEOUT`."""
        connection, response, thread = self._request(method, headers, body)
        reply = DirectResponse(response, thread)

        def close() -> None:
            response.close()
            connection.close()

        if is_event_stream(reply.headers.get("Content-Type")):
            chunks: Iterator[bytes] = iter(lambda: response.read1(65536), b"")
            return reply, SseStream(chunks, close, patience=DIRECT_TIMEOUT)
        reply.content = response.read()
        close()
        return reply, None

    def json(self, response: Any) -> Any:
        """See :meth:`Wire.json`; the body must be ``application/json`` exactly."""
        assert response.headers.get("Content-Type") == "application/json", response.headers.get("Content-Type")
        return json.loads(response.content)

    def text(self, response: Any) -> str:
        """See :meth:`Wire.text`; a streamed body is not read here (empty)."""
        return (response.content or b"").decode("utf-8", "replace")

    def _serve(self, sock: socket.socket) -> None:
        try:
            for request in RequestParser(GUNICORN, sock, CLIENT_ADDRESS):
                response, environ = gunicorn_wsgi.create(request, sock, CLIENT_ADDRESS, LISTENER_ADDRESS, GUNICORN)
                environ["wsgi.multithread"] = True
                body = self._app(environ, response.start_response)
                try:
                    for chunk in body:
                        response.write(chunk)
                    response.close()
                finally:
                    if hasattr(body, "close"):
                        body.close()
                if response.should_close():
                    return
        except NoMoreData:
            pass  # the client closed the connection between requests
        except OSError as exc:
            if exc.errno not in CLIENT_GONE:
                self.errors.append(exc)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            sock.close()

    def close(self) -> None:
        """Close every client end, then check that every serving thread ended without an error.

        Raises:
            AssertionError: a serving thread still ran :data:`DIRECT_TIMEOUT` after its client
                left, or one raised (:attr:`errors`).
        """
        for connection in self._connections:
            connection.close()
        for thread in self._threads:
            thread.join(DIRECT_TIMEOUT)
        alive = [thread.name for thread in self._threads if thread.is_alive()]
        assert not alive, f"serving threads still running {DIRECT_TIMEOUT:g} s after their clients left: {alive}"
        assert not self.errors, self.errors
