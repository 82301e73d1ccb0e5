"""Benchmark: tools/call throughput of one zemcp instance, and of three behind HAProxy.

Runs the deployment of deploy/ on 127.0.0.1: instances as deploy/zemcp@.service starts them
(gunicorn with deploy/gunicorn-instance.conf.py, one worker each) and HAProxy from
deploy/haproxy.cfg. wrk then sends plain ``tools/call`` requests (``ze_execute`` with
``session show``, the application/json path) for a fixed time, rotating over many sessions:

1. straight to one instance;
2. to HAProxy in front of that one instance (the proxy's own cost);
3. to HAProxy in front of three instances, with the sessions created through HAProxy, so
   that initialize spread them round robin.

Prints requests per second of each and the ratio of 3 to 1, then stops everything. Every
response must be a successful tool result (a request that reached another instance would
get 404), or the run fails. Needs wrk and haproxy (Debian: ``apt-get install wrk haproxy``).
Figures depend on the machine; compare runs on the same one. Usage::

    python benchmarks/proxy.py [--seconds 10] [--connections 24] [--sessions 48]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.proxies import HAProxy, Instance, find_binary  # noqa: E402 (needs ROOT on sys.path)

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PROTOCOL_VERSION = "2025-06-18"
#: [seconds] unmeasured load before each measurement (connection pools, first requests).
WARM_UP = 2

# wrk script: a POST per request with a session id taken in turn from IDS and a JSON-RPC id
# unique across wrk's threads (a session refuses an id that is still running in it). Every
# response body must hold a tool result with "isError":false; done() prints the count of
# those that do not.
WRK_SCRIPT = """
local ids = {IDS}
local threads = {{}}
local counter = 0

function setup(thread)
  thread:set("offset", #threads)
  table.insert(threads, thread)
end

function init(args)
  bad = 0
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "{VERSION}"
end

function request()
  counter = counter + 1
  wrk.headers["Mcp-Session-Id"] = ids[(counter + offset) % #ids + 1]
  local body = string.format(
    '{{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{{"name":"ze_execute","arguments":{{"command":"session show"}}}}}}',
    counter * 64 + offset)
  return wrk.format("POST", nil, nil, body)
end

function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"isError":false', 1, true) then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("bad")
  end
  io.write(string.format("bad responses: %d\\n", total))
end
"""


class BenchmarkError(RuntimeError):
    """A tool is missing, or a run produced a failed request."""


def open_sessions(url: str, count: int) -> list[str]:
    """Initialize ``count`` sessions at ``url``; returns their ids."""
    ids = []
    with requests.Session() as http:
        for _ in range(count):
            init = http.post(
                url,
                headers=HEADERS,
                timeout=10,
                data=json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": PROTOCOL_VERSION,
                            "capabilities": {},
                            "clientInfo": {"name": "bench-proxy", "version": "1"},
                        },
                    }
                ),
            )
            init.raise_for_status()
            session = init.headers["Mcp-Session-Id"]
            ready = http.post(
                url,
                headers={**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": PROTOCOL_VERSION},
                timeout=10,
                data=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            ready.raise_for_status()
            ids.append(session)
    return ids


def wrk(url: str, ids: list[str], seconds: float, connections: int, workdir: Path) -> float:
    """Run wrk against ``url`` with the session ``ids``; returns requests per second.

    Raises:
        BenchmarkError: wrk failed, or a response was not a successful tool result.
    """
    script = workdir / "calls.lua"
    script.write_text(WRK_SCRIPT.format(IDS="{" + ",".join(f'"{i}"' for i in ids) + "}", VERSION=PROTOCOL_VERSION))
    # One wrk thread: on a small machine wrk competes with the servers for the CPU.
    done = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", str(script), url],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    )
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", done.stdout, re.M)
    bad = re.search(r"^bad responses: (\d+)", done.stdout, re.M)
    if done.returncode != 0 or rate is None or bad is None:
        raise BenchmarkError(f"wrk failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    if int(bad.group(1)) or "Non-2xx" in done.stdout or "Socket errors" in done.stdout:
        raise BenchmarkError(f"failed requests against {url}:\n{done.stdout}")
    return float(rate.group(1))


def measure(url: str, sessions: int, args: argparse.Namespace, workdir: Path) -> float:
    """Open sessions at ``url``, warm up, then measure; returns requests per second."""
    ids = open_sessions(url, sessions)
    wrk(url, ids, WARM_UP, args.connections, workdir)
    return wrk(url, ids, args.seconds, args.connections, workdir)


def main() -> int:
    """Run the three measurements and print them; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each measurement [s]")
    parser.add_argument("--connections", type=int, default=24, help="concurrent HTTP connections of wrk")
    parser.add_argument("--sessions", type=int, default=48, help="MCP sessions the requests rotate over")
    args = parser.parse_args()
    for tool in ("wrk", "haproxy"):
        if find_binary(tool) is None:
            print(f"benchmarks/proxy.py needs {tool} (Debian: apt-get install {tool})", file=sys.stderr)
            return 2

    with tempfile.TemporaryDirectory(prefix="zemcp-bench-proxy-") as tmp:
        workdir = Path(tmp)
        running: list = []
        try:
            instances = [Instance(name, workdir) for name in ("a", "b", "c")]
            running.extend(instances)
            for instance in instances:
                instance.wait_ready()
            (workdir / "one").mkdir()
            (workdir / "three").mkdir()
            one_proxy = HAProxy(workdir / "one", instances[:1])
            running.append(one_proxy)
            three_proxy = HAProxy(workdir / "three", instances)
            running.append(three_proxy)

            rates = {}
            for label, url in (
                ("one instance, direct", instances[0].url),
                ("one instance behind HAProxy", one_proxy.url),
                ("three instances behind HAProxy", three_proxy.url),
            ):
                rates[label] = measure(url, args.sessions, args, workdir)
                print(f"{label + ':':<32}{rates[label]:8.0f} requests/s", flush=True)
            ratio = rates["three instances behind HAProxy"] / rates["one instance, direct"]
            print(f"{'ratio three behind HAProxy / one direct:':<42}{ratio:.2f}")
        except BenchmarkError as exc:
            print(exc, file=sys.stderr)
            return 1
        finally:
            for process in reversed(running):
                process.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
