"""pydantic models over the transport (werkzeug): argument errors in each version's shape, and
an elicitation with a model's form answered, refused by the model, or never sent."""

import json

import pytest

pytest.importorskip("pydantic", reason="the pydantic package is not installed (pip install '.[pydantic]')")

from tests.support.clients import LATEST_VERSION, inprocess_modern, inprocess_session

ORDER = {"sku": "AB-100", "quantity": 12}


@pytest.fixture
def app():
    from tests.apps.pydantic_orders import app

    return app


def test_tools_list_shows_pydantics_schemas(app):
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    body = peer.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).get_json()
    tools = {tool["name"]: tool for tool in body["result"]["tools"]}
    place = tools["place_order"]
    assert place["inputSchema"]["properties"]["order"]["properties"]["sku"]["description"] == (
        "the stock-keeping unit, such as AB-100"
    )
    assert place["inputSchema"]["properties"]["note"]["maxLength"] == 40
    assert set(place["inputSchema"]["$defs"]) == {"Address", "Size"}
    assert place["outputSchema"]["title"] == "Receipt" and "Order" in place["outputSchema"]["$defs"]


def test_a_model_argument_outside_its_schema_is_refused_as_every_version_says(app):
    """2025-11-25: an isError result the model can correct; 2025-06-18: JSON-RPC error -32602."""
    arguments = {"order": {"sku": "AB-100", "quantity": 0}}
    problem = "invalid arguments for tool 'place_order': argument 'order' at order.quantity: 0 is less than or equal to the minimum of 0"
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    _, r, _ = peer.open_call("place_order", arguments)
    assert r.get_json()["result"] == {"content": [{"type": "text", "text": problem}], "isError": True}
    _, old = inprocess_session(app).call_tool("place_order", arguments)
    assert old.get_json()["error"] == {"code": -32602, "message": f"Invalid params: {problem}"}


def test_a_model_result_is_structured_content(app):
    _, r = inprocess_session(app).call_tool("place_order", {"order": ORDER, "note": "ring"})
    result = r.get_json()["result"]
    assert result["structuredContent"] == {
        "order_id": "AB-100/ring",
        "boxes": 2,
        "order": {"sku": "AB-100", "quantity": 12, "size": "s", "ship_to": None},
    }
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def _ask(app):
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"elicitation": {}})
    rid, r, stream = peer.open_call("checkout", {"order": ORDER})
    ask = stream.next_message()
    assert ask["method"] == "elicitation/create", ask
    return peer, rid, stream, ask


def test_an_elicitation_with_a_model_returns_an_instance(app):
    peer, rid, stream, ask = _ask(app)
    schema = ask["params"]["requestedSchema"]
    assert schema["required"] == ["name", "postcode"] and schema["properties"]["size"] == {
        "type": "string",
        "enum": ["s", "l"],
        "title": "Size",
    }
    peer.answer(
        ask["id"], {"action": "accept", "content": {"name": "Ada", "postcode": "1234", "gift": True, "size": "l"}}
    )
    (final,) = stream.rest()
    assert final["id"] == rid and final["result"]["isError"] is False, final
    assert final["result"]["structuredContent"]["order_id"] == "Ada/gift"
    assert final["result"]["structuredContent"]["order"]["size"] == "l"


def test_an_answer_the_model_refuses_is_malformed(app):
    peer, _, stream, ask = _ask(app)
    peer.answer(ask["id"], {"action": "accept", "content": {"name": "Ada", "postcode": "12ab"}})
    (final,) = stream.rest()
    assert final["result"] == {
        "content": [
            {
                "type": "text",
                "text": "no order placed: malformed elicitation answer: content does not fit Confirmation at postcode: "
                "String should match pattern '^[0-9]{4}$' (got '12ab')",
            }
        ],
        "isError": True,
    }


def test_a_nested_model_form_is_refused_before_anything_is_sent(app):
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"elicitation": {}})
    _, r, _ = peer.open_call("deliver", {})
    assert r.mimetype == "application/json"
    result = r.get_json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(
        "field Delivery.address: a nested model (Address) cannot be elicited"
    )


def test_a_2026_request_elicits_the_model_across_rounds(app):
    """The form goes out as input_required; the retry with the answer gets the model instance."""
    client = inprocess_modern(app)
    first = client.result(client.call_tool("checkout", {"order": ORDER})[1])
    assert first["resultType"] == "input_required"
    (key,) = first["inputRequests"]
    assert first["inputRequests"][key]["params"]["requestedSchema"]["required"] == ["name", "postcode"]
    answer = {key: {"action": "accept", "content": {"name": "Ada", "postcode": "1234", "gift": True}}}
    done = client.result(client.answer("checkout", first, answer, {"order": ORDER})[1])
    assert done["resultType"] == "complete" and done["structuredContent"]["order_id"] == "Ada/gift", done
