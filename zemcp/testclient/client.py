"""The MCP test client behind ``zemcp-test mcp``: a scripted session against a running server.

It reproduces the behaviour of ze's ``ze-test mcp``: wait until the server's port accepts TCP
connections, ``initialize`` (declaring the elicitation capability only when asked), send
``notifications/initialized``, run one directive per input line, and end the session with
DELETE. The directive grammar is in
:func:`zemcp.testclient.directives.parse_directive`; the output rules are in
:meth:`McpTestClient.call_tool`; the HTTP side is :class:`zemcp.testclient.rpc.HttpRpc`.

While a request's stream is open, the server's ``elicitation/create`` requests are answered
from one FIFO of queued answers (:class:`~zemcp.testclient.directives.AnswerQueue`) with a
separate POST; an empty queue answers ``cancel`` so that a wrong scenario ends instead of
waiting for an answer that never comes.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

import requests

from zemcp.testclient.clienterrors import CommandError, TransportError
from zemcp.testclient.directives import AnswerQueue, CallTool, QueueAnswer, Wait, parse_directive
from zemcp.testclient.rpc import CLIENT_NAME, HttpRpc
from zemcp.version import __version__

DEFAULT_PROTOCOL_VERSION = "2025-06-18"
#: [seconds] pause between two TCP connect attempts while waiting for the server.
READY_POLL_INTERVAL = 0.05


class McpTestClient(HttpRpc):
    """One scripted MCP session over Streamable HTTP.

    Every HTTP request goes to ``url`` only (no redirects followed, no proxy taken from the
    environment) and must complete within ``timeout`` seconds, its response body included.

    Args:
        url: the MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        timeout: [seconds] bound on the readiness wait and on each HTTP request.
        elicit: declare ``capabilities.elicitation`` at initialize.
        token: sent as ``Authorization: Bearer <token>`` when given.
        protocol_version: the version requested at initialize.
        verbose: report each response's status and content type on ``stderr``.
        stdout: where tool output goes.
        stderr: where notifications, notes and verbose lines go.
        session: the HTTP session to use (tests pass one with a fake adapter).
    Raises:
        ValueError: ``url`` is not an http(s) URL or ``timeout`` is not positive.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        elicit: bool = False,
        token: str | None = None,
        protocol_version: str = DEFAULT_PROTOCOL_VERSION,
        verbose: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        session: requests.Session | None = None,
    ):
        super().__init__(url, timeout=timeout, token=token, verbose=verbose, stderr=stderr, session=session)
        self.elicit = elicit
        self.protocol_version = protocol_version
        self.stdout = stdout if stdout is not None else sys.stdout
        self.answers = AnswerQueue()
        self.negotiated_version: str | None = None

    # -- the run -------------------------------------------------------------------

    def run(self, lines: Iterable[str]) -> None:
        """The whole session: wait for the port, initialize, run ``lines``, DELETE.

        The session is deleted also when a directive fails (best effort).

        Args:
            lines: the input, one directive per line (read lazily, so a pipe works).
        Raises:
            ClientError: the first failure; the lines after it are not run.
        """
        self.wait_ready()
        try:
            self.initialize()
            self.run_directives(lines)
        finally:
            self.close()

    def wait_ready(self) -> None:
        """Poll a TCP connect to the server until it accepts; no HTTP request is sent.

        Raises:
            TransportError: the port did not accept a connection within ``timeout`` seconds.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                socket.create_connection((self.host, self.port), timeout=max(0.05, min(1.0, remaining))).close()
                return
            except OSError as exc:
                if time.monotonic() >= deadline:
                    raise TransportError(
                        f"{self.host}:{self.port} did not accept a connection within {self.timeout:g} s "
                        f"(--timeout); is the server running? last error: {exc}"
                    ) from None
            time.sleep(READY_POLL_INTERVAL)

    def initialize(self) -> dict[str, Any]:
        """Send ``initialize`` then ``notifications/initialized``; keep the session id.

        Returns:
            the initialize result.
        Raises:
            ClientError: the server refused or answered something unusable.
        """
        result = self.request(
            "initialize",
            {
                "protocolVersion": self.protocol_version,
                "capabilities": {"elicitation": {}} if self.elicit else {},
                "clientInfo": {"name": CLIENT_NAME, "version": __version__},
            },
        )
        version = result.get("protocolVersion")
        if not isinstance(version, str):
            raise TransportError(f"the initialize result has no protocolVersion string: {json.dumps(result)}")
        self.negotiated_version = version
        self._http.headers["MCP-Protocol-Version"] = version
        self.notify("notifications/initialized")
        return result

    def run_directives(self, lines: Iterable[str]) -> None:
        """Run each line's directive in order (see :func:`parse_directive`).

        Raises:
            ClientError: the first failing line; the rest is not read.
        """
        for lineno, line in enumerate(lines, 1):
            directive = parse_directive(line, lineno)
            if isinstance(directive, QueueAnswer):
                self.answers.push(directive.result)
            elif isinstance(directive, Wait):
                time.sleep(directive.seconds)
            elif isinstance(directive, CallTool):
                self.call_tool(directive.name, directive.arguments)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a tool and print its output.

        Output: the ``text`` of each text content item of a successful result on ``stdout``,
        one per line.

        Args:
            name: the tool name.
            arguments: its arguments.
        Returns:
            the ``CallToolResult``.
        Raises:
            CommandError: the result has ``isError: true``.
            RpcError, TransportError: as for :meth:`request`.
        """
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        content = result.get("content")
        if not isinstance(content, list):
            raise TransportError(f"the tools/call result has no content list: {json.dumps(result)}")
        texts = [
            item["text"]
            for item in content
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str)
        ]
        skipped = len(content) - len(texts)
        if result.get("isError") is True:
            raise CommandError("\n".join(texts) if texts else "(the error result has no text)")
        for text in texts:
            self.stdout.write(text + "\n")
        self.stdout.flush()
        if skipped:
            self._note(f"content: {skipped} non-text item(s) of the {name} result not shown")
        return result

    # -- messages from the server --------------------------------------------------

    def _on_server_message(self, message: dict[str, Any], label: str) -> None:
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if not isinstance(method, str):
            self._note(f"note: ignored a message on the stream of {label} that is not for it: {json.dumps(message)}")
        elif "id" in message:
            self._on_server_request(method, message["id"], params, label)
        else:
            self._on_notification(method, params)

    def _on_server_request(self, method: str, request_id: Any, params: dict[str, Any], label: str) -> None:
        request_label = f"{method} (id {json.dumps(request_id)})"
        if method == "elicitation/create":
            if not self.elicit:
                raise TransportError(
                    f"protocol violation: the server sent {request_label} on the stream of {label} "
                    "although this client did not declare the elicitation capability (run with --elicit to declare it)"
                )
            answer = self.answers.pop()
            question = params.get("message", "")
            if answer is None:
                answer = {"action": "cancel"}
                self._note(f"elicit: no answer queued for {request_label} {question!r}; answered cancel (auto-cancel)")
            else:
                self._verbose(f"elicit: {request_label} {question!r} -> {json.dumps(answer)}")
            self._respond(request_id, request_label, result=answer)
        elif method == "ping":
            self._respond(request_id, request_label, result={})
        else:
            self._note(f"note: the server sent {request_label}, which this client does not handle; answered -32601")
            self._respond(
                request_id,
                request_label,
                error={"code": -32601, "message": f"Method not found: {CLIENT_NAME} does not handle {method}"},
            )

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/progress":
            total = params.get("total")
            text = params.get("message")
            self._note(
                f"progress: {params.get('progress')}{'/' + str(total) if total is not None else ''}"
                f"{' ' + text if isinstance(text, str) and text else ''}"
            )
        elif method == "notifications/message":
            data = params.get("data")
            logger = params.get("logger")
            self._note(
                f"log [{params.get('level')}]{' ' + logger if isinstance(logger, str) else ''}: "
                f"{data if isinstance(data, str) else json.dumps(data)}"
            )
        elif method == "notifications/cancelled":
            reason = params.get("reason")
            self._note(
                f"cancelled: the server cancelled its request {json.dumps(params.get('requestId'))}"
                f"{': ' + reason if isinstance(reason, str) and reason else ''}"
            )
        else:
            self._note(f"notification: {method} {json.dumps(params)}")
