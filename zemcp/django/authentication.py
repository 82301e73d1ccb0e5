"""Who an MCP request to a Django site acts for: the site's own authentication.

An MCP client carries no session cookie: it sends a bearer token. A site that already issues
tokens names its way of reading them, in order, as ``view(server, authentication=[...])``:

- a Django REST framework authentication class or instance (``TokenAuthentication``,
  django-oauth-toolkit's ``OAuth2Authentication``, any ``BaseAuthentication``): its
  ``authenticate(request)`` gives ``(user, auth)`` or None and raises ``AuthenticationFailed``
  for a token it refuses; its ``authenticate_header(request)`` is the ``WWW-Authenticate``
  challenge of a 401;
- any callable ``(HttpRequest) -> user or None``, with the challenge ``Bearer``.

The user the site's middleware already established (a session cookie, for a page of the same
origin) comes first. Django REST framework is imported only when one of its classes is named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from django.http import HttpRequest

#: An entry of ``authentication=``: a DRF authentication class or instance, or a callable.
Authenticator = type | Callable[[HttpRequest], Any]


class Refused(Exception):
    """The site's authentication refused the request's credentials (a token it does not know).

    Args:
        message: why, as the authentication said it.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SiteAuthentication:
    """The site's ways of reading a request's credentials, asked in order.

    Args:
        authenticators: DRF authentication classes or instances, and callables
            ``(HttpRequest) -> user or None``; a class is instantiated once, here.
    Raises:
        TypeError: an entry is neither.
    """

    def __init__(self, authenticators: Iterable[Authenticator]):
        self._entries: list[Any] = []
        for entry in authenticators:
            if isinstance(entry, type):
                if not callable(getattr(entry, "authenticate", None)):
                    raise TypeError(
                        f"authentication entry {entry.__qualname__} has no authenticate(request): give a Django REST "
                        "framework authentication class, or a callable (request) -> user or None"
                    )
                entry = entry()
            elif not callable(entry) and not callable(getattr(entry, "authenticate", None)):
                raise TypeError(
                    f"authentication entry {entry!r} is neither a Django REST framework authentication class or "
                    "instance nor a callable (request) -> user or None"
                )
            self._entries.append(entry)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def user(self, request: HttpRequest) -> Any:
        """The user the first authenticator that recognises the request's credentials names.

        Args:
            request: the site's request; its body is read into memory first (a DRF request
                parses it, and zemcp reads it after).
        Returns:
            the user, or None when no authenticator recognised credentials.
        Raises:
            Refused: an authenticator refused the credentials (``AuthenticationFailed``).
        """
        request.body  # noqa: B018 - kept by Django, so that a DRF request's parse leaves it readable
        drf_request = None
        for entry in self._entries:
            if _is_drf(entry):
                if drf_request is None:
                    drf_request = _drf_request(request)
                from rest_framework.exceptions import APIException

                try:
                    found = entry.authenticate(drf_request)
                except APIException as exc:
                    raise Refused(str(exc.detail)) from None
                if found is not None:
                    return found[0]
            else:
                user = entry(request)
                if user is not None and getattr(user, "is_authenticated", True):
                    return user
        return None

    def challenges(self, request: HttpRequest) -> Sequence[str]:
        """The ``WWW-Authenticate`` challenges of a 401: each authenticator's, once each.

        Returns:
            ``["Token", 'Bearer realm="api"']`` and the like; ``["Bearer"]`` for callables.
        """
        drf_request = None
        challenges: list[str] = []
        for entry in self._entries:
            header = getattr(entry, "authenticate_header", None)
            if _is_drf(entry) and callable(header):
                if drf_request is None:
                    drf_request = _drf_request(request)
                challenge = header(drf_request)
            else:
                challenge = "Bearer"
            if challenge and challenge not in challenges:
                challenges.append(challenge)
        return challenges


def _is_drf(entry: Any) -> bool:
    """Whether ``entry`` speaks DRF's authentication protocol (``authenticate(request)``)."""
    return callable(getattr(entry, "authenticate", None))


def _drf_request(request: HttpRequest) -> Any:
    """DRF's request around ``request``, with the site's parsers (a DRF view gives its own; an
    authentication such as django-oauth-toolkit's reads the parsed body)."""
    from rest_framework.parsers import BaseParser
    from rest_framework.request import Request
    from rest_framework.settings import api_settings

    # The settings hold the classes, imported; the stubs type every setting loosely.
    classes = cast("list[type[BaseParser]]", api_settings.DEFAULT_PARSER_CLASSES)
    return Request(request, parsers=[parser() for parser in classes])
