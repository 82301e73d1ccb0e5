"""The command registry: longest word-prefix dispatch and argument strings (zemcp.cli.commands)."""

import pytest

from zemcp.cli.commands import CommandError, CommandRegistry


@pytest.fixture
def registry():
    reg = CommandRegistry()
    for name in ("session", "session show", "session show detail", "server status"):
        reg.command(name, f"help of {name}")(lambda ctx, args, name=name: f"{name}|{args}")
    return reg


@pytest.mark.parametrize(
    "line, name, args",
    [
        ("session show", "session show", ""),
        ("  SESSION   Show  ", "session show", ""),
        ("session show detail now", "session show detail", "now"),
        ("session show other  words here", "session show", "other  words here"),
        ("session", "session", ""),
        ("session list", "session", "list"),
        ("server status --json", "server status", "--json"),
    ],
)
def test_longest_word_prefix_wins(registry, line, name, args):
    """The longest registered name that is a word prefix of the line runs; the rest is its argument."""
    command, rest = registry.match(line)
    assert (command.name, rest) == (name, args)
    assert registry.dispatch(line, ctx=None) == f"{name}|{args}"


@pytest.mark.parametrize("line", ["", "   ", "serve", "server", "sessions show", "status"])
def test_unknown_lines_are_refused_with_a_hint(registry, line):
    """A line that no name prefixes (prefixes must end on a word boundary) names itself and 'help'."""
    with pytest.raises(CommandError, match="run 'help' to list the commands"):
        registry.match(line)


def test_duplicate_and_empty_names_are_refused(registry):
    """Registering a taken (case-insensitively) or empty name raises ValueError."""
    with pytest.raises(ValueError, match="already registered"):
        registry.command("Server  STATUS", "x")(lambda ctx, args: "")
    with pytest.raises(ValueError, match="at least one word"):
        registry.command("  ", "x")(lambda ctx, args: "")


def test_commands_are_listed_sorted(registry):
    """commands() lists every command by name."""
    assert [c.name for c in registry.commands()] == ["server status", "session", "session show", "session show detail"]
