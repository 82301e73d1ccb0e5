"""The audit example of docs/django.md ("Storing the audit log") works as the page shows it.

tests/apps/django_example.py runs the example's app (docs/examples/django_site) in a Django
process of its own (Django's settings are process-wide), with an in-memory SQLite database:
it migrates, calls the site's eliciting tool through the site's MCP view as a logged-in user
in both eras, and reads the admin's changelist of the stored calls.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from tests.support import REPO

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("django") is None, reason="django is not installed (pip install 'zemcp[django]')"
)

EXAMPLE = REPO / "docs/examples/django_site"


def run_example() -> dict:
    """The JSON the example's run prints: the final answers, the stored rows, the changelist."""
    path = os.pathsep.join([str(REPO), str(EXAMPLE), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "tests.apps.django_example"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_each_call_through_the_site_is_a_row_with_the_site_s_user_and_the_admin_lists_it():
    ran = run_example()
    assert ran["final"]["content"][0]["text"].endswith(": ada goes to Oslo on May 1")
    assert ran["trips"] == [["ada", "Oslo", "May 1"]], "the trip is the site's user's; the declined one is not saved"
    assert "book" not in ran["bob_tools"], "a user without trips.add_trip does not see the tool"
    assert ran["declined"]["result"]["isError"] is True
    rows = ran["rows"]
    assert [(r["method"], r["tool"], r["arguments"], r["user"]) for r in rows] == [
        ("tools/call", "book", ["city"], "ada")
    ] * 3
    assert [(r["outcome"], r["reason"], r["protocol_version"]) for r in rows] == [
        ("input_required", "", "2026-07-28"),
        ("ok", "", "2026-07-28"),
        ("declined", "ElicitDeclined", "2025-06-18"),
    ]
    assert all(r["duration"] >= 0 for r in rows)
    changelist = ran["changelist"]
    assert changelist["status"] == 200
    table = changelist["text"][changelist["text"].index('id="result_list"') :]
    body = table[table.index("<tbody>") : table.index("</tbody>")]
    listed = re.findall(r"<tr>.*?</tr>", body, flags=re.S)
    outcomes = [re.search(r'field-outcome">([^<]*)<', row).group(1) for row in listed]
    assert sorted(outcomes) == ["declined", "input_required", "ok"]
    assert all('field-user">ada<' in row and 'field-tool">book<' in row for row in listed)
    assert "3 tool calls" in changelist["text"]
