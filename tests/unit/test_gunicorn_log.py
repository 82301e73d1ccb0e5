"""gunicorn's logger class under ZEMCP_LOG_FORMAT=json (zemcp.http.gunicorn_log), and the
choice of it in zemcp's gunicorn configuration."""

import json
import logging
import os
import subprocess
import sys

import pytest
from gunicorn.config import Config
from gunicorn.instrument.statsd import Statsd

from zemcp.http import gunicorn_log
from zemcp.http.gunicorn_log import JsonLogger, JsonStatsd
from zemcp.logformat import JsonFormatter


@pytest.fixture
def gunicorn_loggers():
    """gunicorn's two loggers and zemcp's are the process's: leave them as they were."""
    loggers = [logging.getLogger(name) for name in ("gunicorn.error", "gunicorn.access", "zemcp")]
    saved = [(log, list(log.handlers), log.level, log.propagate) for log in loggers]
    lent = list(gunicorn_log._lent)
    for log in loggers:
        log.handlers.clear()
    gunicorn_log._lent.clear()
    yield
    for log, handlers, level, propagate in saved:
        log.handlers[:] = handlers
        log.setLevel(level)
        log.propagate = propagate
    gunicorn_log._lent[:] = lent


def config(**settings) -> Config:
    cfg = Config()
    for name, value in settings.items():
        cfg.set(name, value)
    return cfg


def test_the_error_and_access_handlers_write_json_and_keep_it_on_a_reload(gunicorn_loggers):
    cfg = config(errorlog="-", accesslog="-")
    logger = JsonLogger(cfg)
    handlers = [*logger.error_log.handlers, *logger.access_log.handlers]
    assert len(handlers) == 2 and all(isinstance(h.formatter, JsonFormatter) for h in handlers)
    logger.setup(cfg)  # what a configuration reload (SIGHUP) runs
    handlers = [*logger.error_log.handlers, *logger.access_log.handlers]
    assert len(handlers) == 2 and all(isinstance(h.formatter, JsonFormatter) for h in handlers)
    assert type(logger) is JsonLogger


def test_zemcps_records_go_to_the_error_log_from_the_setup_on_and_once_after_a_reload(gunicorn_loggers):
    """Under JSON, records logged while the application is imported (before post_worker_init)
    are gunicorn's error-log lines too; a reload swaps the handlers, never doubles them."""
    cfg = config(errorlog="-", loglevel="warning")
    logger = JsonLogger(cfg)
    zemcp_log = logging.getLogger("zemcp")
    assert zemcp_log.handlers == logger.error_log.handlers and not zemcp_log.propagate
    assert zemcp_log.level == logging.WARNING
    logger.setup(cfg)
    assert zemcp_log.handlers == logger.error_log.handlers and len(zemcp_log.handlers) == 1
    gunicorn_log.send_zemcp_records(logger.error_log)  # post_worker_init, in each worker
    assert zemcp_log.handlers == logger.error_log.handlers


def test_a_statsd_host_makes_the_statsd_logger_with_json_lines(gunicorn_loggers):
    logger = JsonLogger(config(errorlog="-", statsd_host="127.0.0.1:8125"))
    try:
        assert isinstance(logger, JsonStatsd) and isinstance(logger, Statsd)
        assert all(isinstance(h.formatter, JsonFormatter) for h in logger.error_log.handlers)
    finally:
        if logger.sock is not None:
            logger.sock.close()


@pytest.mark.parametrize(
    ("log_format", "chosen"),
    [("json", "zemcp.http.gunicorn_log.JsonLogger"), ("text", "gunicorn.glogging.Logger")],
)
def test_the_configuration_names_the_logger_class_of_the_format(log_format, chosen):
    """gunicorn loads the class the configuration names; text keeps gunicorn's default."""
    code = """
from gunicorn.config import Config
import zemcp.http.gunicorn_conf as conf
cfg = Config()
cfg.set("logger_class", conf.logger_class)
print(conf.logger_class, cfg.logger_class.__module__ + "." + cfg.logger_class.__name__)
"""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZEMCP_")}
    env["ZEMCP_LOG_FORMAT"] = log_format
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [chosen, chosen]


def test_a_gunicorn_record_becomes_a_gunicorn_event(gunicorn_loggers):
    logger = JsonLogger(config(errorlog="-"))
    [handler] = logger.error_log.handlers
    record = logger.error_log.makeRecord(
        "gunicorn.error", logging.INFO, __file__, 1, "Booting worker with pid: %s", (7,), None
    )
    line = json.loads(handler.format(record))
    assert (line["logger"], line["event"], line["message"]) == (
        "gunicorn.error",
        "gunicorn",
        "Booting worker with pid: 7",
    )
