"""A server whose tools take, return and elicit pydantic models (``tests.apps.pydantic_orders:app``)."""

import enum
from typing import Annotated

from pydantic import BaseModel, Field, field_validator

import zemcp
from zemcp import ToolError

server = zemcp.Server("zemcp-pydantic-tests", "1.0")


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


class Address(BaseModel):
    street: str
    city: str


class Order(BaseModel):
    """An order of one product."""

    sku: str = Field(pattern=r"^[A-Z]+-[0-9]+$", description="the stock-keeping unit, such as AB-100")
    quantity: int = Field(gt=0, le=600, description="how many pieces")
    size: Size = Size.SMALL
    ship_to: Address | None = None

    @field_validator("quantity")
    @classmethod
    def whole_boxes(cls, quantity: int) -> int:
        if quantity % 6:
            raise ValueError("pieces come in boxes of 6: order a multiple of 6")
        return quantity


class Receipt(BaseModel):
    order_id: str
    boxes: int
    order: Order


class Confirmation(BaseModel):
    """The confirmation form."""

    name: str = Field(min_length=2, description="your name")
    postcode: str = Field(pattern=r"^[0-9]{4}$", description="the four-digit postcode")
    gift: bool = False
    size: Size | None = None


class Delivery(BaseModel):
    name: str
    address: Address


@server.tool
def place_order(
    order: Order, note: Annotated[str, Field(description="a note for the courier", max_length=40)] = ""
) -> Receipt:
    """Place an order."""
    return Receipt(order_id=f"{order.sku}/{note or '-'}", boxes=order.quantity // 6, order=order)


@server.tool
def checkout(ctx: zemcp.Context, order: Order) -> Receipt:
    """Place an order once the user confirmed it."""
    try:
        form = ctx.elicit(f"Confirm {order.quantity} of {order.sku}", Confirmation)
    except zemcp.ElicitAborted:
        raise
    except zemcp.ElicitError as exc:
        raise ToolError(f"no order placed: {exc}") from None
    size = form.size or order.size
    placed = order.model_copy(update={"size": size})
    return Receipt(order_id=f"{form.name}{'/gift' if form.gift else ''}", boxes=order.quantity // 6, order=placed)


@server.tool
def deliver(ctx: zemcp.Context) -> str:
    """Ask where to deliver, with a form a client cannot show (a nested model)."""
    return ctx.elicit("Where to?", Delivery).name


app = zemcp.McpApp(server)
