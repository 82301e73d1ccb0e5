"""JSON-RPC over Streamable HTTP, the client side of ``zemcp-test``: :class:`HttpRpc`.

Every message is one POST to the endpoint. Responses are read as ``application/json`` or as
``text/event-stream`` with :class:`~zemcp.testclient.sse.SseParser`; the server's own requests
and notifications that arrive on a response stream before the response are handed to
:meth:`HttpRpc._on_server_message`, which the session client implements. The session id the
server gives at ``initialize`` is sent with every later request, and DELETE ends the session.
"""

from __future__ import annotations

import json
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, TextIO
from urllib.parse import urlsplit

import requests

from zemcp.testclient.clienterrors import RpcError, TransportError
from zemcp.testclient.sse import SseParser
from zemcp.version import __version__

CLIENT_NAME = "zemcp-test"
#: HTTP statuses that mean the session was ended by DELETE.
DELETE_OK = (200, 202, 204)


class HttpRpc(ABC):
    """JSON-RPC to one MCP endpoint over Streamable HTTP.

    Every HTTP request goes to ``url`` only (no redirects followed, no proxy taken from the
    environment) and must complete within ``timeout`` seconds, its response body included.

    Args:
        url: the MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        timeout: [seconds] bound on each HTTP request.
        token: sent as ``Authorization: Bearer <token>`` when given.
        verbose: report each response's status and content type on ``stderr``.
        stderr: where notes and verbose lines go.
        session: the HTTP session to use (tests pass one with a fake adapter).
    Raises:
        ValueError: ``url`` is not an http(s) URL or ``timeout`` is not positive.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        token: str | None,
        verbose: bool,
        stderr: TextIO | None,
        session: requests.Session | None,
    ):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the MCP URL must be http(s)://host[:port]/path, got {url!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.timeout = timeout
        self.verbose = verbose
        self.stderr = stderr if stderr is not None else sys.stderr
        self.session_id: str | None = None
        self._next_id = 1
        self._http = session if session is not None else requests.Session()
        # Traffic goes to the given URL only: never through a proxy named in the environment.
        self._http.trust_env = False
        self._http.headers.update(
            {
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "User-Agent": f"{CLIENT_NAME}/{__version__}",
            }
        )
        if token:
            self._http.headers["Authorization"] = f"Bearer {token}"

    def close(self) -> None:
        """End the session with DELETE (best effort: problems are reported on ``stderr`` only)."""
        if self.session_id is None:
            return
        session_id, self.session_id = self.session_id, None
        try:
            response = self._http.delete(
                self.url, headers={"Mcp-Session-Id": session_id}, timeout=self.timeout, allow_redirects=False
            )
            response.close()
        except requests.RequestException as exc:
            self._note(f"warning: DELETE of the session failed: {exc}")
            return
        if response.status_code == 405:
            self._verbose("http: DELETE -> 405: the server does not let clients end sessions")
        elif response.status_code not in DELETE_OK:
            self._note(f"warning: DELETE of the session got HTTP {response.status_code}")
        else:
            self._verbose(f"http: DELETE -> {response.status_code}")

    # -- JSON-RPC over HTTP --------------------------------------------------------

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one JSON-RPC request and return its result.

        Server requests and notifications arriving on the response stream first are handled
        on the way (:meth:`_on_server_message`).

        Args:
            method: the JSON-RPC method.
            params: its params.
        Returns:
            the response's ``result`` object.
        Raises:
            RpcError: the response is a JSON-RPC error.
            TransportError: connection failure, timeout, unexpected status or content type,
                invalid JSON, or a stream that ended without the response.
        """
        request_id = self._next_id
        self._next_id += 1
        label = f"{method} (id {request_id})"
        deadline = time.monotonic() + self.timeout
        response = self._post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, label)
        try:
            final = self._final_response(response, request_id, label, deadline)
        finally:
            response.close()
        if "error" in final:
            error = final["error"] if isinstance(final["error"], dict) else {}
            raise RpcError(error.get("code"), error.get("message"))
        result = final.get("result")
        if not isinstance(result, dict):
            raise TransportError(f"{label}: the result is not a JSON object: {json.dumps(result)}")
        if method == "initialize":
            self.session_id = response.headers.get("Mcp-Session-Id")
            if self.session_id is not None:
                self._http.headers["Mcp-Session-Id"] = self.session_id
        return result

    def _final_response(
        self, response: requests.Response, request_id: int, label: str, deadline: float
    ) -> dict[str, Any]:
        """The JSON-RPC response to ``request_id`` from a JSON body or an event stream."""
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        upgraded = " (the response was upgraded to a stream)" if content_type == "text/event-stream" else ""
        self._verbose(f"http: {label} -> {response.status_code} {content_type or '(no content type)'}{upgraded}")
        if response.status_code != 200:
            body = self._body(response, label, deadline)
            raise TransportError(f"{label} got HTTP {response.status_code}: {_describe(body)}")
        if content_type == "text/event-stream":
            return self._read_stream(response, request_id, label, deadline)
        if content_type != "application/json":
            raise TransportError(
                f"{label} got Content-Type {content_type or '(none)'!r}; expected application/json or text/event-stream"
            )
        body = self._body(response, label, deadline)
        final = _decode(body, label)
        if not self._is_response_to(final, request_id):
            raise TransportError(f"{label}: the JSON body is not the response to id {request_id}: {_describe(body)}")
        return final

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; the server must answer 202.

        Raises:
            TransportError: any other status, or a connection failure.
        """
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._expect_accepted(message, method)

    def _respond(
        self, request_id: Any, label: str, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        self._expect_accepted(message, f"the answer to {label}")

    def _expect_accepted(self, message: dict[str, Any], label: str) -> None:
        deadline = time.monotonic() + self.timeout
        response = self._post(message, label)
        try:
            self._verbose(f"http: {label} -> {response.status_code}")
            if response.status_code != 202:
                raise TransportError(
                    f"{label} got HTTP {response.status_code}, expected 202: "
                    f"{_describe(self._body(response, label, deadline))}"
                )
        finally:
            response.close()

    def _post(self, message: dict[str, Any], label: str) -> requests.Response:
        try:
            return self._http.post(
                self.url, data=json.dumps(message).encode(), stream=True, timeout=self.timeout, allow_redirects=False
            )
        except requests.Timeout:
            raise TransportError(f"{label}: no answer from {self.url} within {self.timeout:g} s (--timeout)") from None
        except requests.RequestException as exc:
            raise TransportError(f"{label}: POST {self.url} failed: {exc}") from None

    def _chunks(self, response: requests.Response, label: str, deadline: float) -> Iterator[bytes]:
        """The body as it arrives; the whole read must end by ``deadline`` (monotonic seconds).

        Before each read the socket timeout is set to the time left, so a server that stops
        sending cannot hold the client past the deadline.
        """
        connection = getattr(response.raw, "connection", None)
        sock = getattr(connection, "sock", None)
        chunks = response.iter_content(chunk_size=None)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportError(f"{label}: the response did not complete within {self.timeout:g} s (--timeout)")
            if sock is not None:
                sock.settimeout(remaining)
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except requests.RequestException as exc:
                # The socket timeout was the time left, so it may fire a hair before the deadline.
                if time.monotonic() >= deadline - 0.01:
                    raise TransportError(
                        f"{label}: the response did not complete within {self.timeout:g} s (--timeout)"
                    ) from None
                raise TransportError(f"{label}: reading the response failed: {exc}") from None
            yield chunk

    def _body(self, response: requests.Response, label: str, deadline: float) -> bytes:
        return b"".join(self._chunks(response, label, deadline))

    def _read_stream(self, response: requests.Response, request_id: int, label: str, deadline: float) -> dict[str, Any]:
        parser = SseParser()
        for chunk in self._chunks(response, label, deadline):
            for event in parser.feed(chunk):
                if event.type != "message":
                    self._verbose(f"sse: ignored an event of type {event.type!r}")
                    continue
                if not event.data.strip():
                    continue  # an event with an empty data field only carries an id
                message = _decode(event.data.encode(), f"{label}: an SSE event")
                if self._is_response_to(message, request_id):
                    return message
                self._on_server_message(message, label)
        raise TransportError(f"{label}: the event stream ended without the response to id {request_id}")

    @staticmethod
    def _is_response_to(message: dict[str, Any], request_id: int) -> bool:
        mid = message.get("id")
        return (
            "method" not in message
            and ("result" in message or "error" in message)
            and isinstance(mid, int)
            and not isinstance(mid, bool)
            and mid == request_id
        )

    @abstractmethod
    def _on_server_message(self, message: dict[str, Any], label: str) -> None:
        """Handle a request or notification of the server that came on the stream of ``label``.

        Raises:
            ClientError: the message ends the run.
        """

    # -- output --------------------------------------------------------------------

    def _note(self, line: str) -> None:
        self.stderr.write(line + "\n")
        self.stderr.flush()

    def _verbose(self, line: str) -> None:
        if self.verbose:
            self._note(line)


def _decode(body: bytes, label: str) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise TransportError(f"{label}: the body is not valid JSON ({exc}): {_describe(body)}") from None
    if not isinstance(message, dict):
        raise TransportError(f"{label}: expected one JSON-RPC message object, got {_describe(body)}")
    return message


def _describe(body: bytes) -> str:
    """A short, one-line rendering of a response body for an error message."""
    try:
        message = json.loads(body)
    except ValueError:
        message = None
    if isinstance(message, dict) and isinstance(message.get("error"), dict):
        error = message["error"]
        return f"RPC error {error.get('code')}: {error.get('message')}"
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    if not text:
        return "(empty body)"
    return text if len(text) <= 300 else text[:300] + "..."
