"""The ``zemcp-test`` console script: test tools for zemcp servers.

``zemcp-test mcp`` runs one scripted MCP session (see :mod:`zemcp.testclient.client`):
directives on stdin, tool output on stdout, errors and notifications on stderr, exit status 0
when the end of input is reached and 1 at the first error.
"""

from __future__ import annotations

import sys

import click

from zemcp.version import __version__

try:
    from zemcp.testclient.client import DEFAULT_PROTOCOL_VERSION, McpTestClient
    from zemcp.testclient.clienterrors import ClientError
except ModuleNotFoundError as exc:  # the client extra is not installed
    if exc.name != "requests":
        raise
    sys.exit(
        "zemcp-test needs the client extra (requests), which serving does not: "
        "pip install '.[client]' in the zemcp checkout, or pip install requests"
    )

DEFAULT_URL = "http://127.0.0.1:8000/mcp"


@click.group()
@click.version_option(__version__, prog_name="zemcp-test")
def main() -> None:
    """Test tools for zemcp servers."""


@main.command()
@click.option("--url", help=f"The MCP endpoint.  [default: {DEFAULT_URL}]")
@click.option("--port", type=click.IntRange(1, 65535), help="Shorthand for --url http://127.0.0.1:PORT/mcp.")
@click.option("--elicit", is_flag=True, help="Declare the elicitation capability at initialize.")
@click.option("--token", help="Send 'Authorization: Bearer TOKEN' with every request.")
@click.option(
    "--timeout",
    type=click.FloatRange(0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the port to accept connections, and for each HTTP request (its response body included).",
)
@click.option(
    "--protocol-version",
    default=DEFAULT_PROTOCOL_VERSION,
    show_default=True,
    help="The MCP protocol version requested at initialize.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="On stderr, report each response's HTTP status and Content-Type (a tools/call "
    "answered as a stream shows text/event-stream) and each elicitation answer.",
)
def mcp(
    url: str | None,
    port: int | None,
    elicit: bool,
    token: str | None,
    timeout: float,
    protocol_version: str,
    verbose: bool,
) -> None:
    """Run an MCP session scripted by directives on stdin, one per line.

    \b
      elicit-accept JSON   queue an accept answer with that content (a JSON object)
      elicit-decline       queue a decline answer
      elicit-cancel        queue a cancel answer
      @TOOL [JSON]         call TOOL with those arguments (default {})
      wait DURATION        sleep, e.g. 500ms or 2s
      # ...                a comment; blank lines are ignored too
      anything else        run it as a command: @ze_execute {"command": LINE}

    Queued answers are used in order for the elicitations of the whole run; with none
    queued, an elicitation is answered cancel (and a line on stderr says so). Each tool
    call's text output goes to stdout. The first error prints 'error: ...' on stderr and
    exits 1; the end of input exits 0. The session is deleted at the end either way.
    """
    if url is not None and port is not None:
        raise click.UsageError("give either --url or --port, not both")
    if port is not None:
        url = f"http://127.0.0.1:{port}/mcp"
    try:
        client = McpTestClient(
            url or DEFAULT_URL,
            timeout=timeout,
            elicit=elicit,
            token=token,
            protocol_version=protocol_version,
            verbose=verbose,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--url") from None
    try:
        client.run(sys.stdin)
    except ClientError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
