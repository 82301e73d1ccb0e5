"""A pydantic tool over gunicorn: it takes a model, elicits a model's form and returns a model."""

import pytest

pytest.importorskip("pydantic", reason="the pydantic package is not installed (pip install '.[pydantic]')")

APP = "tests.apps.pydantic_orders:app"


def test_a_tool_that_elicits_a_models_form_gets_the_instance_and_returns_a_model(start_server):
    client = start_server(app=APP).session()
    order = {"sku": "AB-100", "quantity": 18, "ship_to": {"street": "1 Main St", "city": "Oslo"}}
    call = client.call_message({"order": order}, name="checkout")
    response, stream = client.open_stream(call)
    assert response.status_code == 200 and stream is not None, response.headers
    request = stream.next_message()
    assert request is not None and request["method"] == "elicitation/create", request
    assert request["params"]["message"] == "Confirm 18 of AB-100"
    schema = request["params"]["requestedSchema"]
    assert schema["required"] == ["name", "postcode"]
    assert schema["properties"]["name"] == {
        "type": "string",
        "title": "Name",
        "description": "your name",
        "minLength": 2,
    }

    answer = client.accept(request["id"], {"name": "Ada", "postcode": "0042", "size": "l", "note": "not in the form"})
    assert answer.status_code == 202, answer.text
    final = stream.next_message()
    assert final is not None and final["id"] == call["id"], final
    result = final["result"]
    assert result["isError"] is False, result
    assert result["structuredContent"] == {
        "order_id": "Ada",
        "boxes": 3,
        "order": {"sku": "AB-100", "quantity": 18, "size": "l", "ship_to": {"street": "1 Main St", "city": "Oslo"}},
    }
    tools = {tool["name"]: tool for tool in client.rpc("tools/list")["tools"]}
    assert tools["checkout"]["outputSchema"]["title"] == "Receipt"
