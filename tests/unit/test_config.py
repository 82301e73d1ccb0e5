"""Settings: environment parsing, validation and the derived thread budget (zemcp.config)."""

import re
import subprocess
import sys

import pytest

from tests.support import REPO
from zemcp.config import Settings, is_loopback_host, reference
from zemcp.config.declaration import declarations


def test_defaults_are_safe():
    """Defaults bind loopback, cap sessions and pending elicitations, and time out."""
    s = Settings()
    assert s.bind == "127.0.0.1:8000" and s.bind_is_loopback
    assert (s.max_sessions, s.max_pending_per_session, s.max_body_bytes) == (1024, 32, 1048576)
    assert (s.session_ttl, s.elicitation_timeout, s.keepalive_interval) == (1800, 600, 15)
    assert s.allowed_origins == ()


def test_every_field_reads_from_its_environment_variable():
    """Each field has a ZEMCP_<NAME> variable, parsed to the field's type."""
    env = {
        "ZEMCP_BIND": "0.0.0.0:9000",
        "ZEMCP_ALLOWED_ORIGINS": "https://App.example.com/, http://x.test:8080",
        "ZEMCP_SESSION_TTL": "60",
        "ZEMCP_MAX_SESSIONS": "5",
        "ZEMCP_MAX_PENDING_PER_SESSION": "2",
        "ZEMCP_MAX_PENDING": "3",
        "ZEMCP_ELICITATION_TIMEOUT": "1.5",
        "ZEMCP_KEEPALIVE_INTERVAL": "0.25",
        "ZEMCP_MAX_BODY_BYTES": "1000",
        "ZEMCP_THREADS": "8",
        "ZEMCP_WORKERS": "2",
        "ZEMCP_ENDPOINT": "/x",
        "ZEMCP_INSTANCE": "node-7",
    }
    s = Settings.from_env(env)
    assert s.bind == "0.0.0.0:9000" and not s.bind_is_loopback
    assert s.allowed_origins == ("https://app.example.com", "http://x.test:8080")
    assert (s.session_ttl, s.max_sessions, s.max_pending_per_session, s.max_pending) == (60.0, 5, 2, 3)
    assert (s.elicitation_timeout, s.keepalive_interval, s.max_body_bytes) == (1.5, 0.25, 1000)
    assert (s.threads, s.workers, s.endpoint, s.instance) == (8, 2, "/x", "node-7")
    assert s.pending_budget == 3


def test_stream_settings_read_from_the_environment():
    """The resumable-stream knobs have variables and safe defaults (polling off, finite window)."""
    defaults = Settings().stream_limits
    assert (defaults.retry, defaults.window, defaults.poll_interval) == (1.0, 60.0, 0.0)
    assert (defaults.max_events, defaults.max_bytes, Settings().max_replay_bytes) == (256, 1048576, 33554432)
    env = {
        "ZEMCP_STREAM_RETRY": "0.5",
        "ZEMCP_RESUME_WINDOW": "5",
        "ZEMCP_STREAM_BUFFER_EVENTS": "8",
        "ZEMCP_STREAM_BUFFER_BYTES": "4096",
        "ZEMCP_MAX_REPLAY_BYTES": "65536",
        "ZEMCP_STREAM_POLL_INTERVAL": "30",
    }
    s = Settings.from_env(env)
    limits = s.stream_limits
    assert (limits.retry, limits.window, limits.max_events, limits.max_bytes, limits.poll_interval) == (
        0.5,
        5.0,
        8,
        4096,
        30.0,
    )
    assert s.max_replay_bytes == 65536


def test_the_log_format_is_text_unless_json_is_asked_for():
    assert Settings().log_format == "text"
    assert Settings.from_env({"ZEMCP_LOG_FORMAT": "json"}).log_format == "json"
    assert Settings.from_env({"ZEMCP_LOG_FORMAT": " "}).log_format == "text"


def test_overrides_win_over_environment():
    """Keyword overrides beat ZEMCP_* variables."""
    assert Settings.from_env({"ZEMCP_THREADS": "8"}, threads=12).threads == 12


@pytest.mark.parametrize(
    "env, text",
    [
        ({"ZEMCP_SESSION_TTL": "soon"}, "ZEMCP_SESSION_TTL='soon' is not a number of seconds"),
        ({"ZEMCP_MAX_SESSIONS": "1.5"}, "ZEMCP_MAX_SESSIONS='1.5' is not a whole number"),
        ({"ZEMCP_THREADS": "2"}, "threads (ZEMCP_THREADS) must be at least 3"),
        (
            {"ZEMCP_MAX_PENDING": "8", "ZEMCP_THREADS": "8"},
            "max_pending (ZEMCP_MAX_PENDING) must be between 1 and threads - listen_budget - standalone_budget - 1",
        ),
        (
            {"ZEMCP_ELICITATION_TIMEOUT": "0"},
            "elicitation_timeout (ZEMCP_ELICITATION_TIMEOUT) must be a positive, finite number",
        ),
        (
            {"ZEMCP_KEEPALIVE_INTERVAL": "nan"},
            "keepalive_interval (ZEMCP_KEEPALIVE_INTERVAL) must be a positive, finite number",
        ),
        ({"ZEMCP_SESSION_TTL": "inf"}, "session_ttl (ZEMCP_SESSION_TTL) must be a positive, finite number"),
        ({"ZEMCP_ENDPOINT": "mcp"}, "endpoint (ZEMCP_ENDPOINT) must start with '/'"),
        ({"ZEMCP_INSTANCE": "a.b"}, "instance (ZEMCP_INSTANCE) must be 1-40 characters"),
        (
            {"ZEMCP_RESUME_WINDOW": "1", "ZEMCP_STREAM_RETRY": "2"},
            "resume_window (ZEMCP_RESUME_WINDOW, 1 s) must be longer than stream_retry (ZEMCP_STREAM_RETRY",
        ),
        ({"ZEMCP_STREAM_BUFFER_EVENTS": "0"}, "stream_buffer_events (ZEMCP_STREAM_BUFFER_EVENTS) must be at least 1"),
        (
            {"ZEMCP_STREAM_POLL_INTERVAL": "-1"},
            "stream_poll_interval (ZEMCP_STREAM_POLL_INTERVAL) must be a finite number of seconds, 0 or more",
        ),
        ({"ZEMCP_LOG_FORMAT": "logfmt"}, "log_format (ZEMCP_LOG_FORMAT) must be text or json, got 'logfmt'"),
    ],
)
def test_bad_values_are_refused_with_the_variable_named(env, text):
    """A bad value fails at start-up with a message naming the variable or field."""
    with pytest.raises(ValueError, match=text.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        Settings.from_env(env)


@pytest.mark.parametrize("threads, reserve, budget", [(3, 2, 1), (8, 2, 4), (32, 8, 16), (64, 16, 40)])
def test_pending_budget_formula(threads, reserve, budget):
    """pending_budget = threads - max(2, threads // 4) - listen_budget - standalone_budget leaves threads for answer POSTs."""
    s = Settings(threads=threads)
    assert (s.thread_reserve, s.pending_budget) == (reserve, budget)


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("[::1]", True),
        ("::1", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("example.com", False),
        ("10.0.0.1", False),
        ("", False),
    ],
)
def test_is_loopback_host(host, loopback):
    """Only localhost and loopback literals count as loopback."""
    assert is_loopback_host(host) is loopback


def test_unix_socket_bind_is_not_loopback():
    """A unix socket bind does not turn on the Host check."""
    assert not Settings(bind="unix:/run/zemcp.sock").bind_is_loopback


def test_default_instance_is_unique_per_settings():
    """Without ZEMCP_INSTANCE every process gets its own random instance name."""
    names = {Settings().instance for _ in range(20)}
    assert len(names) == 20 and all(len(n) == 8 for n in names)


def test_a_request_state_key_given_as_one_string_is_one_key():
    """Settings(request_state_key="...") takes the string as one key (commas separate several), not as characters."""
    assert Settings(request_state_key="a" * 32).request_state_key == ("a" * 32,)
    assert Settings(request_state_key=f"{'a' * 32}, {'b' * 32}").request_state_key == ("a" * 32, "b" * 32)
    with pytest.raises(ValueError, match="at least 32 characters"):
        Settings(request_state_key="short")


#: The annotation each declared kind goes with (annotations are postponed: strings).
KIND_ANNOTATIONS = {
    "str": "str",
    "seconds": "float",
    "number": "float",
    "int": "int",
    "int or unset": "int | None",
    "bool": "bool",
    "list": "tuple[str, ...]",
    "words": "tuple[str, ...]",
}


def test_every_field_is_declared_with_a_kind_of_its_type():
    """Each field carries one declaration, whose kind (how its variable parses) fits its Python type."""
    declared = declarations(Settings)
    assert len(declared) == 60
    for name, (item, declaration) in declared.items():
        assert str(item.type) == KIND_ANNOTATIONS[declaration.kind], name
        assert declaration.doc.strip() or declaration.shares_row, f"{name} has no description"


def test_the_settings_reference_in_the_docs_is_current():
    """docs/configuration.md holds the table and range checks the declarations generate."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert text.count(reference.BEGIN) == 1 and text.count(reference.END) == 1
    assert reference.replace_generated(text) == text, (
        "docs/configuration.md is out of date with the settings' declarations (zemcp/config/settings.py); "
        "regenerate it with: python -m zemcp.config.reference --write docs/configuration.md"
    )


def test_the_reference_rows_follow_the_declarations():
    """Type, unit and default come from the declaration; shared rows and variables read outside Settings show."""
    rows = reference.table().splitlines()
    assert "| `ZEMCP_SESSION_TTL` | `session_ttl` | float | seconds | `1800` (30 min) | A handshake-era" in "\n".join(
        rows
    )
    assert any(
        row.startswith("| `ZEMCP_MAX_PENDING` | `max_pending` | int or unset | requests | unset (derived) |")
        for row in rows
    )
    assert any(
        row.startswith("| `ZEMCP_METRICS_ALLOW` | `metrics_allow` | tuple of str | networks | `127.0.0.0/8,::1/128` |")
        for row in rows
    )
    assert any(
        row.startswith("| `ZEMCP_OTEL_CAPTURE_CONTENT` | `otel_capture_content` | bool | on/off | `off` |")
        for row in rows
    )
    shared = "| `ZEMCP_AUTH_CLIENT_ID`, `ZEMCP_AUTH_CLIENT_SECRET` | `auth_client_id`, `auth_client_secret` | str | | empty |"
    assert any(row.startswith(shared) for row in rows)
    variables = [row.split(" | ")[0] for row in rows[2:]]
    assert variables.index("| `ZEMCP_SPEED`") == variables.index("| `ZEMCP_OTEL`") + 1
    assert len(rows) == 2 + 59 + 1, "one row a field, the two client credentials sharing one, and ZEMCP_SPEED"
    assert "<second\\|minute\\|hour>" in reference.table(), "a pipe inside a cell is escaped"


def test_the_reference_command_prints_and_rewrites_only_the_generated_part(tmp_path):
    """python -m zemcp.config.reference prints the generated part; --write replaces it between the markers."""
    command = [sys.executable, "-m", "zemcp.config.reference"]
    printed = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    assert printed.stdout == reference.markdown()
    target = tmp_path / "configuration.md"
    target.write_text(f"# Configuration\n\nProse.\n\n{reference.BEGIN}\nan old table\n{reference.END}\n\n## After\n")
    subprocess.run([*command, "--write", str(target)], capture_output=True, text=True, timeout=60, check=True)
    assert target.read_text() == f"# Configuration\n\nProse.\n\n{reference.markdown()}\n## After\n"
    with pytest.raises(ValueError, match="no generated settings reference"):
        reference.replace_generated("# Configuration without markers\n")


@pytest.mark.parametrize("origin", ["app.example.com", "https://app.example.com/path", "https://", "*"])
def test_an_allowed_origin_not_of_the_form_a_browser_sends_is_refused(origin):
    """ZEMCP_ALLOWED_ORIGINS takes scheme://host[:port]: anything else could never match an Origin."""
    with pytest.raises(ValueError, match=r"allowed_origins \(ZEMCP_ALLOWED_ORIGINS\) takes origins of the form"):
        Settings.from_env({"ZEMCP_ALLOWED_ORIGINS": origin})


def test_allowed_origins_keep_their_form_lowercased_without_a_trailing_slash():
    settings = Settings.from_env({"ZEMCP_ALLOWED_ORIGINS": "HTTPS://App.Example.com/, vscode-webview://abc:8080"})
    assert settings.allowed_origins == ("https://app.example.com", "vscode-webview://abc:8080")


# -- a site's configuration (settings.ZEMCP, app.config["ZEMCP"]) ------------------------------


def test_a_sites_configuration_takes_python_values_and_strings_under_the_variables_names():
    settings = Settings.from_site(
        {
            "MAX_SESSIONS": 16,
            "AUDIT_LOG": True,
            "SESSION_TTL": "90",
            "ALLOWED_ORIGINS": ["https://a.test"],
            "AUTH_SCOPES": ["mcp", "read"],
        },
        "settings.ZEMCP",
        environ={},
    )
    assert (settings.max_sessions, settings.audit_log, settings.session_ttl) == (16, True, 90.0)
    assert settings.allowed_origins == ("https://a.test",)
    assert settings.auth_scopes == ("mcp", "read")
    assert (
        Settings.from_site({"MAX_SESSIONS": None}, "settings.ZEMCP", environ={}).max_sessions == Settings().max_sessions
    )


def test_the_environment_wins_over_a_sites_configuration():
    settings = Settings.from_site({"MAX_SESSIONS": 16}, "settings.ZEMCP", environ={"ZEMCP_MAX_SESSIONS": "24"})
    assert settings.max_sessions == 24


@pytest.mark.parametrize(
    ("site", "message"),
    [
        ({"MAX_SESSION": 4}, "settings.ZEMCP has no setting 'MAX_SESSION': did you mean 'MAX_SESSIONS'?"),
        ({"ZEMCP_MAX_SESSIONS": 4}, "did you mean 'MAX_SESSIONS'?"),
        ({"MAX_SESSIONS": 1.5}, "settings.ZEMCP['MAX_SESSIONS']=1.5 is not a whole number"),
        ({"MAX_SESSIONS": True}, "settings.ZEMCP['MAX_SESSIONS']=True is not a whole number"),
        (["MAX_SESSIONS"], "settings.ZEMCP is a list: make it a dict of zemcp's settings"),
        (
            {"THREADS": 16},
            "settings.ZEMCP['THREADS'] cannot come from the site: gunicorn (gunicorn.conf.py) reads it before the "
            "site is loaded; set ZEMCP_THREADS in gunicorn's environment instead",
        ),
        ({"BIND": "0.0.0.0:80"}, "set ZEMCP_BIND in gunicorn's environment instead"),
        ({"AUDIT_LOG": 1}, "settings.ZEMCP['AUDIT_LOG']=1 is not True or False"),
        ({"ALLOWED_ORIGINS": "https://a.test"}, None),
        ({"ALLOWED_ORIGINS": [1]}, "is not a list of strings"),
    ],
)
def test_a_sites_configuration_names_the_key_it_cannot_use(site, message):
    if message is None:
        assert Settings.from_site(site, "settings.ZEMCP", environ={}).allowed_origins == ("https://a.test",)
        return
    with pytest.raises(ValueError, match=re.escape(message)):
        Settings.from_site(site, "settings.ZEMCP", environ={})
