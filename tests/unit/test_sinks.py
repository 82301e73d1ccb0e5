"""Reply sinks: the JSON-or-stream decision and frame draining (zemcp.replies.sinks)."""

import threading
import time

from zemcp.replies.sinks import ReplySink
from zemcp.state.streamlogs import KEEPALIVE


def test_finish_without_sending_is_plain_json():
    """A handler that only finishes gives (False, response): answer application/json."""
    sink = ReplySink()
    sink.finish({"id": 1})
    assert sink.first() == (False, {"id": 1})


def test_send_before_finish_upgrades_to_stream():
    """A message sent before the response turns the reply into a stream carrying both, in order."""
    sink = ReplySink()
    sink.send({"method": "elicitation/create", "id": "e"})
    assert sink.first() == (True, None)
    threading.Timer(0.05, sink.finish, ({"id": 1, "result": {}},)).start()
    assert list(sink.frames(5)) == [{"method": "elicitation/create", "id": "e"}, {"id": 1, "result": {}}]


def test_keepalive_yielded_while_idle():
    """Nothing to send for a keep-alive interval yields KEEPALIVE, then the frames continue."""
    sink = ReplySink()
    sink.send({"method": "m"})
    frames = sink.frames(0.05)
    assert next(frames) == {"method": "m"}
    started = time.monotonic()
    assert next(frames) is KEEPALIVE
    assert time.monotonic() - started >= 0.04
    sink.finish({"id": 1})
    assert list(frames) == [{"id": 1}]


def test_cancelled_stream_ends_without_response():
    """finish(None) ends the stream without a final frame."""
    sink = ReplySink()
    sink.send({"method": "m"})
    sink.finish(None)
    assert list(sink.frames(5)) == [{"method": "m"}]


def test_nothing_is_sent_after_finish_or_close():
    """send() after finish or close returns False and queues nothing."""
    sink = ReplySink()
    sink.finish({"id": 1})
    assert not sink.send({"method": "late"})
    closed = ReplySink()
    closed.close()
    assert not closed.send({"method": "late"})


def test_close_runs_callbacks_once():
    """close() runs each callback once; a callback added after close runs at once."""
    sink, seen = ReplySink(), []
    sink.on_close(lambda: seen.append("a"))
    sink.close()
    sink.close()
    sink.on_close(lambda: seen.append("b"))
    assert seen == ["a", "b"]
