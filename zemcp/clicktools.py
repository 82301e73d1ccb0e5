"""Click command-line interfaces served as MCP tools, or as text commands behind one tool.

A stable path of the public API (``from zemcp.clicktools import add_click_tools``); the code
is :mod:`zemcp.cli.clicktools`. ``log`` (the ``zemcp.clicktools`` logger) is here too, as it
was when this module held the code.
"""

from zemcp.cli.clickrun import ClickResult, invoke
from zemcp.cli.clickschema import command_schema
from zemcp.cli.clicktools import add_click_commands, add_click_tools, log as log

__all__ = ["ClickResult", "add_click_commands", "add_click_tools", "command_schema", "invoke"]
