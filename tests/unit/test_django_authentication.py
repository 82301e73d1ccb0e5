"""zemcp.django.authentication: what ``view(authentication=...)`` accepts (the requests it reads
are tested over HTTP in tests/integration/test_http_django_view.py)."""

import re

import pytest

pytest.importorskip("django", reason="django is not installed (pip install 'zemcp[django]')")

from zemcp.django.authentication import SiteAuthentication


class NotAnAuthentication:
    """A class without authenticate(request)."""


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (NotAnAuthentication, "authentication entry NotAnAuthentication has no authenticate(request)"),
        (42, "authentication entry 42 is neither a Django REST framework authentication class or instance"),
    ],
)
def test_an_entry_that_is_neither_a_drf_authentication_nor_a_callable_is_refused(entry, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        SiteAuthentication([entry])


def test_no_entries_is_no_authentication():
    assert not SiteAuthentication([])
    assert SiteAuthentication([lambda request: None])
