"""Multi-round-trip replay (zemcp.eras.modern.mrtr): recorded answers, held answers, open questions, broken replays."""

import pytest

from zemcp.eras.modern.mrtr import InputRequired, ReplayMismatch, Round, check_responses, parse_state, question_digest
from zemcp.protocol.capabilities import ClientView
from zemcp.protocol.elicitation import ClientDisconnected
from zemcp.protocol.inputs import InputRequest
from zemcp.protocol.jsonrpc import ProtocolError
from zemcp.replies.sinks import ReplySink

CLIENT = ClientView("2026-07-28", {}, {"elicitation": {}})
Q1 = InputRequest("elicitation/create", {"message": "one"}, "one")
Q2 = InputRequest("sampling/createMessage", {"messages": [], "maxTokens": 5}, "two")
A1 = {"action": "accept", "content": {"x": 1}}
A2 = {"role": "assistant", "content": {"type": "text", "text": "t"}, "model": "m"}


def new_round(state=None, responses=None):
    answers, asked, held = parse_state(state)
    return Round(CLIENT, 1, ReplySink(), None, answers, asked, held, check_responses(responses, asked), 600)


def ended_state(round_):
    _, state = round_.input_required()
    return state


def test_first_round_asks_and_records_what_it_asked():
    """An unanswered question ends the round; the state lists it as asked, with no answers."""
    r = new_round()
    with pytest.raises(InputRequired):
        r.ask([Q1])
    body, state = r.input_required()
    assert body == {
        "resultType": "input_required",
        "inputRequests": {"one": {"method": Q1.method, "params": Q1.params}},
    }
    assert state == {"v": 1, "answers": [], "asked": [["one", question_digest(Q1)]], "held": {}}


def test_an_answer_is_recorded_and_replayed_in_order():
    """Round 2 records the answer and asks the next question; round 3 replays it without a response."""
    r1 = new_round()
    with pytest.raises(InputRequired):
        r1.ask([Q1])
    r2 = new_round(ended_state(r1), {"one": A1})
    assert r2.ask([Q1])[0].result == A1
    with pytest.raises(InputRequired):
        r2.ask([Q2])
    r3 = new_round(ended_state(r2), {"two": A2})
    assert [a.result for a in (r3.ask([Q1])[0], r3.ask([Q2])[0])] == [A1, A2]
    assert r3.unused_answers == 0


def test_an_answer_to_a_question_not_asked_last_round_is_ignored():
    """With a requestState, an answer counts only for the question it was asked for."""
    r1 = new_round()
    with pytest.raises(InputRequired):
        r1.ask([Q1])
    r2 = new_round(ended_state(r1), {"two": A2})
    with pytest.raises(InputRequired):
        r2.ask([Q1])


def test_the_keys_that_answered_nothing_are_named():
    """ignored_keys lists the responses no question of the round took, in the client's order;
    answers taken, held, or recorded in an earlier round are not among them."""
    r1 = new_round(None, {"zero": A1, "one": A1})
    with pytest.raises(InputRequired):
        r1.ask([Q1, Q2])
    assert r1.ignored_keys == ["zero"]
    r2 = new_round(ended_state(r1), {"later": A2, "one": A1, "two": A2, "wrong": A2})
    assert [a.result for a in r2.ask([Q1, Q2])] == [A1, A2]
    assert r2.ignored_keys == ["later", "wrong"]
    r3 = new_round()
    with pytest.raises(InputRequired):
        r3.ask([Q1, Q2])
    held = new_round(ended_state(r3), {"two": A2, "x": A1})
    with pytest.raises(InputRequired):
        held.ask([Q1, Q2])
    assert held.ignored_keys == ["x"]


def test_without_state_answers_are_taken_by_key():
    """A first request's responses answer the questions whose keys they name."""
    assert new_round(None, {"one": A1}).ask([Q1])[0].result == A1


def test_a_later_answer_of_a_batch_is_held_until_the_earlier_one_arrives():
    """Answers stay in question order: an answer to the 2nd question waits for the 1st."""
    r1 = new_round()
    with pytest.raises(InputRequired):
        r1.ask([Q1, Q2])
    r2 = new_round(ended_state(r1), {"two": A2})
    with pytest.raises(InputRequired) as info:
        r2.ask([Q1, Q2])
    assert [key for key, _, _ in info.value.requests] == ["one"]
    state = ended_state(r2)
    assert state["answers"] == [] and state["held"] == {"two": [question_digest(Q2), A2]}
    r3 = new_round(state, {"one": A1})
    assert [a.result for a in r3.ask([Q1, Q2])] == [A1, A2]


def test_a_changed_question_is_a_replay_mismatch():
    """A different question where an answer is recorded raises ReplayMismatch, never the old answer."""
    r2 = new_round({"v": 1, "answers": [["one", question_digest(Q1), A1]], "asked": [], "held": {}})
    changed = InputRequest("elicitation/create", {"message": "changed"}, "one")
    with pytest.raises(ReplayMismatch, match="question 1"):
        r2.ask([changed])
    with pytest.raises(ReplayMismatch):
        r2.ask([Q1])


def test_positional_keys():
    """Questions without a key are named by method and position."""
    r = new_round()
    with pytest.raises(InputRequired) as info:
        r.ask([InputRequest("roots/list", {}), InputRequest("elicitation/create", {"message": "m"})])
    assert [key for key, _, _ in info.value.requests] == ["roots-1", "elicitation-2"]


def test_an_aborted_round_asks_nothing():
    """Once the client closed the stream, ask and notify raise the abort reason."""
    r = new_round()
    r.abort(ClientDisconnected())
    with pytest.raises(ClientDisconnected):
        r.ask([Q1])
    with pytest.raises(ClientDisconnected):
        r.notify({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})


@pytest.mark.parametrize(
    "state",
    [
        {"v": 2, "answers": [], "asked": [], "held": {}},
        {"v": 1},
        [1],
        "x",
        {"v": 1, "answers": [["k", "d"]], "asked": [], "held": {}},
    ],
)
def test_a_state_of_another_layout_is_refused(state):
    """A state this version did not make is -32602 invalid_request_state."""
    with pytest.raises(ProtocolError) as info:
        parse_state(state)
    assert info.value.code == -32602 and info.value.data == {"reason": "invalid_request_state"}


@pytest.mark.parametrize("responses, asked", [([], None), ("x", []), ({"one": 5}, [["one", "d"]]), ({"k": []}, None)])
def test_malformed_input_responses_are_refused(responses, asked):
    """inputResponses must be an object, and each answer that may be used an object."""
    with pytest.raises(ProtocolError) as info:
        check_responses(responses, asked)
    assert info.value.code == -32602


def test_extra_malformed_keys_are_ignored_when_not_asked():
    """With a requestState, answers to questions not asked are not even looked at."""
    assert check_responses({"other": 5}, [["one", "d"]]) == {"other": 5}
