"""``flask zemcp ...``: the app's MCP server from the command line (a Flask ``AppGroup``).

- ``flask zemcp inspect [--json]``: every tool, resource, template and prompt with its schemas,
  ``permission=`` rule and scopes (:mod:`zemcp.cli.inspect`).
- ``flask zemcp stdio [--user ID]``: serve the app's server over MCP's stdio transport
  (basic/transports/stdio) for a local desktop client, acting for that user of the app
  (:func:`zemcp.cli.stdio.run`); logs go to stderr.
- ``flask zemcp call TOOL [ARGUMENTS] [--user ID]``: one ``tools/call`` run in-process
  (:func:`zemcp.cli.call.call_tool`, a client that cannot be asked), its result printed.

Each runs inside an app context of the app (Flask's ``with_appcontext``); ``--user`` is loaded
by the extension's ``load_user=`` or Flask-Login's ``user_loader``.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click
from flask import current_app
from flask.cli import AppGroup

from zemcp.cli import inspect as inspection
from zemcp.cli.call import call_tool

if TYPE_CHECKING:
    from zemcp.flask.state import State

commands = AppGroup("zemcp", help="The app's MCP server (zemcp): inspect it, serve it over stdio, call a tool.")

_LOG_LEVELS = click.Choice(["debug", "info", "warning", "error", "critical"])


def _state() -> State:
    state: State = current_app.extensions["zemcp"]
    return state


def _user(state: State, user_id: str | None) -> Any:
    if user_id is None:
        return None
    try:
        return state.user_named(current_app, user_id)
    except LookupError as exc:
        raise click.UsageError(str(exc)) from None


@commands.command()
@click.option("--json", "as_json", is_flag=True, help="The description as JSON, as the list methods give each item.")
def inspect(as_json: bool) -> None:
    """List what the app's MCP server offers, with who may use each."""
    description = inspection.describe(_state().server)
    click.echo(json.dumps(description, indent=2) if as_json else inspection.render(description), nl=as_json)


@commands.command()
@click.option("--user", "user_id", help="Act for this user of the app (the id its user loader takes).")
@click.option("--log-level", type=_LOG_LEVELS, default="info", show_default=True, help="Logs go to stderr.")
def stdio(user_id: str | None, log_level: str) -> None:
    """Serve the app's MCP server over stdio, for a client that starts it as a subprocess."""
    from zemcp.cli import stdio as transport

    state = _state()
    reader, writer = transport.claim_stdio()
    transport.log_to_stderr(log_level, state.server.settings.log_format)
    transport.run(state.server, reader, writer, user=_user(state, user_id))


@commands.command()
@click.argument("tool")
@click.argument("arguments", default="{}")
@click.option("--user", "user_id", help="Act for this user of the app (the id its user loader takes).")
def call(tool: str, arguments: str, user_id: str | None) -> None:
    """Call TOOL with ARGUMENTS (a JSON object) and print its result.

    The call runs in this process as a client that cannot be asked anything: a tool that asks
    the user answers that it cannot. Exits 1 when the result is an error.
    """
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise click.BadParameter(f'not JSON ({exc}); give an object such as \'{{"text": "hi"}}\'') from None
    if not isinstance(parsed, dict):
        raise click.BadParameter('the arguments are a JSON object, such as \'{"text": "hi"}\'')
    state = _state()
    try:
        answer = call_tool(state.server, tool, parsed, _user(state, user_id), client="flask zemcp call")
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    if "error" in answer:
        raise click.ClickException(answer["error"]["message"])
    result = answer["result"]
    for item in result.get("content", []):
        click.echo(item["text"] if item.get("type") == "text" else json.dumps(item))
    if "structuredContent" in result and not result.get("content"):
        click.echo(json.dumps(result["structuredContent"], indent=2))
    if result.get("isError"):
        sys.exit(1)
