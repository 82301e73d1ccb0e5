"""Render a configuration template of deploy/ for a set of zemcp instances.

The templates (haproxy.cfg, nginx.conf) hold two kinds of placeholders:

* ``{{INSTANCE}}`` and ``{{ADDRESS}}``: a line that contains either is written once per
  instance, in the order the instances are given, with the instance's name (its
  ``ZEMCP_INSTANCE``) and its ``host:port``;
* any other ``{{NAME}}``: replaced by the value given with ``--set NAME=VALUE``.

Every placeholder of the template must get a value and every ``--set`` must be used, so a
typo fails loudly instead of producing a half-rendered file. Usage::

    python3 deploy/render.py deploy/nginx.conf --set LISTEN=0.0.0.0:8080 \\
        --set LOG_DIR=/var/log/nginx --instance a=127.0.0.1:8001 --instance b=127.0.0.1:8002

The result goes to standard output, or to ``--output FILE``. Only the standard library is
used, so this runs on a proxy host without zemcp installed.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")
PER_INSTANCE = frozenset({"INSTANCE", "ADDRESS"})
# The same rule zemcp applies to ZEMCP_INSTANCE; it also keeps names safe inside the nginx
# map regex and as HAProxy server and nginx upstream names.
INSTANCE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
ADDRESS = re.compile(r"^[A-Za-z0-9.\-]+:[0-9]{1,5}$|^\[[0-9A-Fa-f:.]+\]:[0-9]{1,5}$")


class RenderError(ValueError):
    """The template and the given values do not fit together."""


def render(template: str, values: dict[str, str], instances: list[tuple[str, str]]) -> str:
    """Fill ``template`` with ``values`` and repeat per-instance lines for ``instances``.

    Args:
        template: the template text.
        values: placeholder name -> value for the placeholders that are not per instance.
        instances: ``(name, "host:port")`` pairs, at least one.
    Returns:
        the rendered text.
    Raises:
        RenderError: no instances, a bad instance name or address, a duplicate name, a
            placeholder without a value, or a value the template does not use.
    """
    if not instances:
        raise RenderError("at least one --instance NAME=HOST:PORT is needed")
    seen: set[str] = set()
    for name, address in instances:
        if not INSTANCE_NAME.match(name):
            raise RenderError(
                f"instance name {name!r} must be 1-40 characters of A-Z, a-z, 0-9, '_' and '-' (as ZEMCP_INSTANCE)"
            )
        if not ADDRESS.match(address):
            raise RenderError(f"address {address!r} of instance {name!r} must be HOST:PORT")
        if name in seen:
            raise RenderError(f"instance name {name!r} is given twice; every instance needs its own name")
        seen.add(name)
    used = set(PLACEHOLDER.findall(template))
    missing = sorted(used - PER_INSTANCE - values.keys())
    if missing:
        raise RenderError(
            "no value for " + ", ".join("{{%s}}" % m for m in missing) + "; give it with --set NAME=VALUE"
        )
    unused = sorted(values.keys() - used)
    if unused:
        raise RenderError("the template has no placeholder " + ", ".join("{{%s}}" % u for u in unused))

    def fill(line: str, extra: dict[str, str]) -> str:
        return PLACEHOLDER.sub(lambda m: extra.get(m.group(1), values.get(m.group(1), "")), line)

    out = []
    for line in template.splitlines(keepends=True):
        if PER_INSTANCE & set(PLACEHOLDER.findall(line)):
            out.extend(fill(line, {"INSTANCE": name, "ADDRESS": address}) for name, address in instances)
        else:
            out.append(fill(line, {}))
    return "".join(out)


def _pair(text: str, what: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{what} must look like NAME=VALUE, got {text!r}")
    return name, value


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("template", type=Path, help="deploy/haproxy.cfg or deploy/nginx.conf")
    parser.add_argument(
        "--set",
        dest="values",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=lambda t: _pair(t, "--set"),
        help="value of the placeholder {{NAME}}",
    )
    parser.add_argument(
        "--instance",
        dest="instances",
        action="append",
        default=[],
        metavar="NAME=HOST:PORT",
        type=lambda t: _pair(t, "--instance"),
        help="one zemcp instance (repeat for each)",
    )
    parser.add_argument("--output", "-o", type=Path, help="write here instead of standard output")
    args = parser.parse_args(argv)
    try:
        text = render(args.template.read_text(), dict(args.values), args.instances)
    except (RenderError, OSError) as exc:
        print(f"render: {args.template}: {exc}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
