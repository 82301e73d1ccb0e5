"""What the header tests share: the protocol version their requests carry, and refused()."""

import pytest

from zemcp.protocol.header_values import HeaderError

V = "2026-07-28"


def refused(call, *args, match=None):
    """Run call and return the HeaderError it must raise."""
    with pytest.raises(HeaderError, match=match) as info:
        call(*args)
    return info.value
