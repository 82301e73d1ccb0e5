"""zemcp inspect: what a server offers, with schemas and who may use each (zemcp.cli.inspect)."""

import json

import pytest
from click.testing import CliRunner

import zemcp
from zemcp.cli.inspect import describe, render
from zemcp.cli.serve import TargetError, load_target, main


def is_staff(user: object) -> bool:
    """Staff only."""
    return getattr(user, "is_staff", False)


def make_server() -> zemcp.Server:
    server = zemcp.Server("shop", "2.1")

    @server.tool
    def search(query: str, limit: int = 10) -> list[str]:
        """Search the catalogue.

        More words that the summary leaves out.
        """
        return []

    @server.tool(permission=["shop.view_order", "shop.change_order"], scopes=["orders"])
    def refund(order: str) -> str:
        """Refund an order."""
        return order

    @server.resource("shop://prices", permission=is_staff, mime_type="application/json")
    def prices() -> str:
        """The price list."""
        return "{}"

    @server.resource("shop://orders/{number}")
    def order(number: str) -> str:
        """One order."""
        return number

    @server.prompt(permission="shop.view_order")
    def complaint(order: str, tone: str = "calm") -> str:
        """Answer a complaint."""
        return order

    return server


def test_describe_lists_every_registration_with_its_permission_and_scopes():
    description = describe(make_server())
    tools = {tool["name"]: tool for tool in description["tools"]}
    assert (description["name"], description["version"]) == ("shop", "2.1")
    assert tools["search"]["permission"] is None and tools["search"]["scopes"] == []
    assert tools["search"]["inputSchema"]["required"] == ["query"]
    assert tools["refund"]["permission"] == "shop.view_order and shop.change_order"
    assert tools["refund"]["scopes"] == ["orders"]
    assert description["resources"][0]["permission"] == f"{__name__}.is_staff"
    assert description["resourceTemplates"][0]["uriTemplate"] == "shop://orders/{number}"
    assert description["prompts"][0]["permission"] == "shop.view_order"


def test_render_words_it_for_a_terminal():
    text = render(describe(make_server()))
    assert text.startswith("shop 2.1: 2 tools, 1 resource, 1 resource template, 1 prompt\n")
    assert "  search: Search the catalogue.\n    permission: everyone\n    inputSchema: {" in text
    assert (
        "  refund: Refund an order.\n    permission: shop.view_order and shop.change_order\n    scopes: orders\n"
        in text
    )
    assert f"  shop://prices: The price list.\n    permission: {__name__}.is_staff\n" in text
    assert "    mimeType: application/json\n" in text
    assert "  complaint: Answer a complaint.\n    permission: shop.view_order\n    arguments: order, tone?\n" in text


def test_the_command_prints_text_or_json(tmp_path):
    target = tmp_path / "shop.py"
    target.write_text(
        "import zemcp\n\nserver = zemcp.Server('shop', '2.1')\n\n\n@server.tool(permission='shop.view_order')\n"
        "def refund(order: str) -> str:\n    '''Refund an order.'''\n    return order\n"
    )
    runner = CliRunner()
    text = runner.invoke(main, ["inspect", str(target)])
    assert text.exit_code == 0, text.output
    assert "shop 2.1: 1 tool, 0 resources, 0 resource templates, 0 prompts" in text.output
    assert "permission: shop.view_order" in text.output
    as_json = runner.invoke(main, ["inspect", "--json", str(target)])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["tools"][0]["permission"] == "shop.view_order"


def decorated_server() -> zemcp.Server:
    server = zemcp.Server(
        "atlas",
        "1.0",
        title="Atlas",
        website_url="https://atlas.example/",
        icons=[zemcp.Icon("https://atlas.example/logo.png", theme="dark")],
    )

    @server.tool(icons=[{"src": "data:image/png;base64," + "A" * 80}], meta={"com.example/area": "maps"})
    def locate(place: str) -> str:
        """Locate a place."""
        return place

    return server


def test_icons_and_meta_in_json_and_in_text():
    description = describe(decorated_server())
    assert description["title"] == "Atlas" and description["websiteUrl"] == "https://atlas.example/"
    assert description["icons"] == [{"src": "https://atlas.example/logo.png", "theme": "dark"}]
    tool = description["tools"][0]
    assert tool["icons"] == [{"src": "data:image/png;base64," + "A" * 80}]
    assert tool["_meta"] == {"com.example/area": "maps"}
    text = render(description)
    assert text.startswith(
        "atlas 1.0: 1 tool, 0 resources, 0 resource templates, 0 prompts\n  title: Atlas\n"
        "  websiteUrl: https://atlas.example/\n  icons: https://atlas.example/logo.png (dark)\n"
    )
    # A data: URI is clipped to keep the line short; the JSON has it whole.
    clipped = ("data:image/png;base64," + "A" * 80)[:57] + "..."
    assert f"    icons: {clipped}\n" in text
    assert '    _meta: {"com.example/area":"maps"}\n' in text


def test_a_server_that_cannot_be_served_is_described_and_refused_to_serve_in_one_line(tmp_path):
    target = tmp_path / "broken.py"
    target.write_text(
        "import zemcp\n\nserver = zemcp.Server('broken')\n\n\n@server.tool(ui_resource='ui://broken/card.html')\n"
        "def card() -> str:\n    '''Shows a card.'''\n    return 'card'\n"
    )
    described = CliRunner().invoke(main, ["inspect", str(target)])
    assert described.exit_code == 0 and "  card: Shows a card." in described.output, described.output
    with pytest.raises(
        TargetError, match=r"broken\.py: tool 'card' shows ui_resource 'ui://broken/card\.html', but no"
    ):
        load_target(str(target))
