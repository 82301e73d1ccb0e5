# examples/click_tools.py
"""A Click command-line interface served as MCP tools, and as text commands behind one tool.

Serve it from the repository root with
``gunicorn -c gunicorn.conf.py examples.click_tools:app``, or run it as the command line it
also is: ``python -m examples.click_tools greet Ada --times 2``.
"""

import time

import click

import zemcp
from zemcp.cli.clicktools import add_click_commands, add_click_tools
from zemcp.cli.commands import CommandRegistry, add_builtin_commands, add_execute_tool


@click.group()
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Small team tasks."""
    ctx.obj = {"greeting": "Hello"}


@cli.command()
@click.argument("name")
@click.option("--shout/--no-shout", default=False, help="Write the greeting in capitals.")
@click.option("--times", type=click.IntRange(1, 5), default=1, help="How many greetings.")
@click.option("--pause", type=click.FloatRange(0, 1), default=0.0, help="Seconds to wait between greetings.")
@click.pass_obj
def greet(obj: dict, name: str, shout: bool, times: int, pause: float) -> None:
    """Greet someone by name."""
    for i in range(times):
        if i:
            time.sleep(pause)
        text = f"{obj['greeting']}, {name}!"
        click.echo(text.upper() if shout else text)


@cli.command()
@click.argument("numbers", nargs=-1, type=float, required=True)
def total(numbers: tuple[float, ...]) -> None:
    """Add numbers up."""
    click.echo(f"{sum(numbers):g}")


@cli.group()
def release() -> None:
    """Releases."""


@release.command()
@click.option("--env", type=click.Choice(["staging", "production"]), required=True, help="Where to deploy.")
@click.option("--version", "version", required=True, help="The version to deploy, such as 1.4.2.")
@click.option("--dry-run", is_flag=True, help="Only say what would happen.")
def deploy(env: str, version: str, dry_run: bool) -> None:
    """Deploy a version to an environment."""
    if env == "production" and version.endswith("-rc"):
        raise click.BadParameter("release candidates do not go to production", param_hint="'--version'")
    click.echo(f"{'would deploy' if dry_run else 'deployed'} {version} to {env}")


@release.command()
@click.argument("version")
@click.pass_context
def check(ctx: click.Context, version: str) -> None:
    """Check that a version is MAJOR.MINOR.PATCH; exit code 3 when it is not."""
    if len(version.split(".")) != 3 or not all(part.isdigit() for part in version.split(".")):
        click.echo(f"{version!r} is not MAJOR.MINOR.PATCH", err=True)
        ctx.exit(3)
    click.echo(f"{version} is fine")


server = zemcp.Server("click-tasks", "1.0.0")
# One tool per command: greet, total, release_deploy, release_check.
add_click_tools(server, cli, elicit_missing=True)

# The same commands as text lines behind one tool: tasks_execute {"command": "greet Ada --shout"}.
commands = CommandRegistry()
add_builtin_commands(commands)
add_click_commands(commands, cli)
add_execute_tool(server, commands, name="tasks_execute")

app = zemcp.McpApp(server)

if __name__ == "__main__":
    cli()
