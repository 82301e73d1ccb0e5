"""Sealed ``requestState`` tokens for multi round-trip requests.

MCP 2026-07-28 basic/patterns/mrtr (SEP-2322): a ``tools/call``, ``prompts/get`` or
``resources/read`` that needs input from the user ends with ``{"resultType": "input_required",
"inputRequests": {...}, "requestState": "<opaque>"}``; the client sends the same request again
with ``inputResponses`` and the ``requestState`` echoed byte for byte. The token comes back from
the client, so it is attacker-controlled: here it is encrypted and authenticated with
AES-256-GCM, and the protected claims bind it to the originating request (method, target and a
digest of the arguments), to this server (audience), optionally to the authenticated principal,
and to a short lifetime. A token stays replayable until it expires; one-time use would need
state kept on the server.

Token format: ``"v1."`` + base64url without padding of ``key id (4 bytes) + nonce (12 bytes) +
ciphertext with GCM tag``; the ``"v1."`` prefix and the key id are the associated data. The
plaintext is the compact JSON object ``{"v": 1, "iat": int, "exp": int, "m": method, "t": target,
"a": arguments digest, "aud": audience, "p"?: principal digest, "s": state}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zemcp.protocol import jsontext

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

#: Shortest operator secret accepted [characters].
MIN_KEY_CHARS = 32
#: Longest token :meth:`RequestStateSealer.open` decodes [characters]; longer ones are refused
#: unread so that a client cannot make the server decode and decrypt arbitrary amounts of data.
MAX_TOKEN_CHARS = 256 * 1024
#: How far ``iat`` may lie ahead of the opener's clock [seconds], for clock skew between the
#: instances of one deployment.
MAX_CLOCK_SKEW = 60

_VERSION = 1
_PREFIX = "v1."
_KEY_ID_BYTES = 4
_NONCE_BYTES = 12
_TAG_BYTES = 16
_HKDF_INFO = b"zemcp request state v1"
# Domain separation: a principal digest can never equal an arguments digest of the same text.
_PRINCIPAL_LABEL = b"zemcp request state principal v1\x00"
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
_REQUIRED_CLAIMS = frozenset({"v", "iat", "exp", "m", "t", "a", "aud", "s"})
_OPTIONAL_CLAIMS = frozenset({"p"})
_STRING_CLAIMS = ("m", "t", "a", "aud")
_START_AGAIN = "start the request again without requestState and inputResponses"
#: What the client is told of each refusal reason: which check failed, never a claim, a digest
#: or a key. Only an authentic token gets past "tampered", so the later reasons tell nothing
#: about the keys.
_TOLD = {
    "too long": f"requestState is longer than any this server issues ({MAX_TOKEN_CHARS} characters at most)",
    "malformed": "requestState is malformed: it is not a requestState this server issued",
    "unknown key": "requestState names a key this server does not hold: another server issued it, or it was altered",
    "tampered": "requestState was tampered with: it fails its integrity check",
    "unsupported version": "requestState was made by another version of this server",
    "issued in the future": "requestState is dated in the future: the clocks of this server's instances differ",
    "expired": "requestState expired",
    "bound to another audience": "requestState was issued by another server",
    "bound to another method": "requestState was issued for another method",
    "bound to another target": "requestState was issued for another tool, prompt or resource",
    "bound to other arguments": "requestState was issued for other arguments",
    "bound to another principal": "requestState was issued to other credentials",
}


class RequestStateError(Exception):
    """A ``requestState`` token that does not open (MCP 2026-07-28 basic/patterns/mrtr, SEP-2322).

    ``str(exc)`` is safe to send to the client: it says which check failed (tampered with,
    expired, issued for other arguments, ...) and what to do, and holds nothing of the token,
    its claims or the keys.

    Args:
        reason: one of the :attr:`reason` values.
        message: what the client is told; when empty, what failed for ``reason`` and that the
            request must be started again without ``requestState`` and ``inputResponses``.

    Attributes:
        reason: why the token was refused: one of ``"too long"``, ``"malformed"``,
            ``"unknown key"``, ``"tampered"``, ``"unsupported version"``,
            ``"issued in the future"``, ``"expired"``, ``"bound to another audience"``,
            ``"bound to another method"``, ``"bound to another target"``,
            ``"bound to other arguments"``, ``"bound to another principal"``.
    """

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or f"{_TOLD[reason]}; {_START_AGAIN}")
        self.reason = reason


def new_key() -> str:
    """A fresh random secret for ``ZEMCP_REQUEST_STATE_KEY``.

    Returns 43 URL-safe characters (32 random bytes). MCP 2026-07-28 basic/patterns/mrtr
    (SEP-2322).
    """
    return secrets.token_urlsafe(32)


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode_canonical(text: str) -> bytes | None:
    """The bytes ``text`` encodes; None unless ``text`` is exactly what :func:`_b64encode` makes."""
    # The standard decoder tolerates stray characters, padding and nonzero spare bits, which
    # would let many strings stand for one token.
    if not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        return None
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return raw if _b64encode(raw) == text else None


class StateTooLarge(ValueError):
    """The state to seal, with what the request carried, is too big or too deeply nested to
    travel as a ``requestState``; the message says which and by how much."""


def _canonical_json(value: Any) -> bytes:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode(
            "ascii"
        )
    except RecursionError:
        raise StateTooLarge("the arguments are nested too deeply to be bound into a requestState") from None


def _arguments_digest(arguments: Any) -> str:
    # Canonical JSON, so that the same arguments re-sent in another key order still match.
    return _b64encode(hashlib.sha256(_canonical_json(arguments)).digest()[:16])


def _principal_digest(principal: str) -> str:
    # Only a digest goes into the token: the principal need not travel, even encrypted.
    return _b64encode(hashlib.sha256(_PRINCIPAL_LABEL + principal.encode("utf-8")).digest()[:16])


def _key_id(derived: bytes) -> bytes:
    # A hash of the derived key, not of the secret, so no token carries a hash of a secret.
    return hashlib.sha256(derived).digest()[:_KEY_ID_BYTES]


class _Ciphers:
    """The AES-256-GCM ciphers of a key ring: keys derived from the secrets by HKDF-SHA256.

    Attributes:
        seal_key_id: the id of the first secret's key, which seals.
        sealer: its cipher.
        openers: key id -> the ciphers of every key with that id (two different keys sharing
            a 4-byte id is unlikely but harmless: opening tries each). A secret listed twice
            counts once.
    """

    def __init__(self, keys: Sequence[str]) -> None:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        derived_keys = [
            HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(secret.encode("utf-8"))
            for secret in keys
        ]
        self.seal_key_id = _key_id(derived_keys[0])
        self.sealer = AESGCM(derived_keys[0])
        self.openers: dict[bytes, list[AESGCM]] = {}
        for derived in dict.fromkeys(derived_keys):
            self.openers.setdefault(_key_id(derived), []).append(AESGCM(derived))


def _is_int(value: Any) -> bool:
    # JSON true parses to a bool, which Python also counts as an int.
    return isinstance(value, int) and not isinstance(value, bool)


class RequestStateSealer:
    """Seals and opens ``requestState`` tokens (MCP 2026-07-28 basic/patterns/mrtr, SEP-2322).

    Every instance of a deployment (all gunicorn workers, all hosts) must share the keys, or a
    retry served by another instance is refused.
    """

    def __init__(self, keys: Sequence[str], ttl: float, audience: str) -> None:
        """Derive the AES-256 keys.

        Args:
            keys: operator secrets, each a string of at least 32 characters. ``keys[0]`` seals;
                every key opens, so a new key is rolled out as ``[new, old]`` and ``old`` is
                dropped once the tokens it sealed have expired.
            ttl: lifetime of a sealed token [seconds], > 0.
            audience: the server name; a token opens only with the same audience.
        Raises:
            ValueError: no key, a key that is not a string of at least 32 characters (the
                message names ``ZEMCP_REQUEST_STATE_KEY`` and never contains the secret), a
                ``ttl`` that is not a finite number above 0, or an empty ``audience``.
        """
        if isinstance(keys, str):
            # A lone string is a sequence of one-character strings: say what went wrong instead.
            raise ValueError("ZEMCP_REQUEST_STATE_KEY: pass a list of secrets, not a single string")
        if not keys:
            raise ValueError(
                "ZEMCP_REQUEST_STATE_KEY is required: at least one secret of at least "
                f"{MIN_KEY_CHARS} characters (make one with zemcp.eras.modern.request_state.new_key())"
            )
        for index, secret in enumerate(keys):
            if not isinstance(secret, str) or len(secret) < MIN_KEY_CHARS:
                raise ValueError(
                    f"ZEMCP_REQUEST_STATE_KEY: secret number {index + 1} must be a string of at "
                    f"least {MIN_KEY_CHARS} characters (make one with "
                    "zemcp.eras.modern.request_state.new_key())"
                )
        if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or not (math.isfinite(ttl) and ttl > 0):
            raise ValueError(f"request state ttl must be a finite number of seconds above 0, got {ttl!r}")
        if not isinstance(audience, str) or not audience:
            raise ValueError(f"request state audience must be a non-empty string, got {audience!r}")
        self._ttl = ttl
        self._audience = audience
        self._secrets = tuple(keys)
        # The ciphers are made at the first seal or open: cryptography loads only in a process
        # that serves a 2026-07-28 round that asks or answers.
        self._ciphers: _Ciphers | None = None
        self._ciphers_lock = threading.Lock()

    def _keys(self) -> _Ciphers:
        ciphers = self._ciphers
        if ciphers is None:
            with self._ciphers_lock:
                if self._ciphers is None:
                    self._ciphers = _Ciphers(self._secrets)
                ciphers = self._ciphers
        return ciphers

    def seal(
        self,
        state: Any,
        *,
        method: str,
        target: str,
        arguments: Any,
        principal: str | None = None,
        now: float | None = None,
    ) -> str:
        """The ``requestState`` token carrying ``state``, bound to the request being answered.

        Args:
            state: any JSON value (what the handler needs back on the retry).
            method: the request's method, e.g. ``"tools/call"``.
            target: the tool or prompt name, or the resource URI.
            arguments: the request's arguments as a JSON value; :meth:`open` must be given the
                same value (key order aside), so normalise an absent value the same way both times.
            principal: the authenticated principal, or None for an unauthenticated request.
            now: the current time [seconds since the epoch]; ``time.time()`` when None.
        Returns:
            ``"v1."`` followed by base64url text, at most :data:`MAX_TOKEN_CHARS` characters.
        Raises:
            TypeError: ``method``, ``target`` or ``principal`` is not a string, or ``state`` or
                ``arguments`` is not JSON-serialisable.
            ValueError: ``state`` or ``arguments`` holds NaN or an infinity.
            StateTooLarge: the token would be longer than :data:`MAX_TOKEN_CHARS`, or the state
                or arguments are nested too deeply for JSON.
        """
        if not isinstance(method, str) or not isinstance(target, str):
            raise TypeError("request state method and target must be strings")
        if principal is not None and not isinstance(principal, str):
            raise TypeError("request state principal must be a string or None")
        issued = time.time() if now is None else now
        claims: dict[str, Any] = {
            "v": _VERSION,
            "iat": math.floor(issued),
            # Rounded up so that a token lives at least ttl seconds.
            "exp": math.ceil(issued + self._ttl),
            "m": method,
            "t": target,
            "a": _arguments_digest(arguments),
            "aud": self._audience,
            "s": state,
        }
        if principal is not None:
            claims["p"] = _principal_digest(principal)
        try:
            # Compact UTF-8, as every message: an answer holding a lone surrogate is escaped.
            plaintext = jsontext.dumps(claims)
            # The parser nests less deeply than the encoder: a state open() could not read
            # must fail here, where it is made, not on the client's next round.
            json.loads(plaintext)
        except RecursionError:
            raise StateTooLarge("the answers are nested too deeply to be carried in a requestState") from None
        ciphers = self._keys()
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = ciphers.sealer.encrypt(nonce, plaintext, _PREFIX.encode("ascii") + ciphers.seal_key_id)
        token = _PREFIX + _b64encode(ciphers.seal_key_id + nonce + sealed)
        if len(token) > MAX_TOKEN_CHARS:
            # open() would refuse it; fail here, where the oversized state is made.
            raise StateTooLarge(
                f"the answers given so far need a requestState of {len(token)} characters, more than "
                f"the limit of {MAX_TOKEN_CHARS}"
            )
        return token

    def open(
        self,
        token: Any,
        *,
        method: str,
        target: str,
        arguments: Any,
        principal: str | None = None,
        now: float | None = None,
    ) -> Any:
        """The state sealed in ``token``, once checked against the request that brought it back.

        Args:
            token: the ``requestState`` the client sent (any JSON value; only a string can pass).
            method, target, arguments, principal: the retried request's, as for :meth:`seal`.
            now: the current time [seconds since the epoch]; ``time.time()`` when None.
        Returns:
            the ``state`` given to :meth:`seal`, as a JSON value.
        Raises:
            RequestStateError: the token is not a string, longer than :data:`MAX_TOKEN_CHARS`,
                malformed, sealed with a key not in the ring, tampered with, of another claims
                version, issued more than :data:`MAX_CLOCK_SKEW` seconds in the future, expired,
                or bound to another audience, method, target, arguments or principal (including
                a principal on one side only). ``exc.reason`` says which.
        """
        if not isinstance(token, str):
            raise RequestStateError("malformed")
        if len(token) > MAX_TOKEN_CHARS:
            raise RequestStateError("too long")
        if not token.startswith(_PREFIX):
            raise RequestStateError("malformed")
        raw = _b64decode_canonical(token[len(_PREFIX) :])
        if raw is None or len(raw) < _KEY_ID_BYTES + _NONCE_BYTES + _TAG_BYTES:
            raise RequestStateError("malformed")
        key_id = raw[:_KEY_ID_BYTES]
        nonce = raw[_KEY_ID_BYTES : _KEY_ID_BYTES + _NONCE_BYTES]
        sealed = raw[_KEY_ID_BYTES + _NONCE_BYTES :]
        openers = self._keys().openers.get(key_id)
        if openers is None:
            raise RequestStateError("unknown key")
        claims = self._decrypt(openers, nonce, sealed, _PREFIX.encode("ascii") + key_id)
        self._check(
            claims,
            method=method,
            target=target,
            arguments=arguments,
            principal=principal,
            now=time.time() if now is None else now,
        )
        return claims["s"]

    @staticmethod
    def _decrypt(openers: list[AESGCM], nonce: bytes, sealed: bytes, aad: bytes) -> dict[str, Any]:
        """The claims object, shape-checked. Raises RequestStateError."""
        from cryptography.exceptions import InvalidTag

        for cipher in openers:
            try:
                plaintext = cipher.decrypt(nonce, sealed, aad)
                break
            except InvalidTag:
                continue
        else:
            raise RequestStateError("tampered")
        try:
            claims = json.loads(plaintext)
        except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested too deeply to parse
            raise RequestStateError("malformed") from None
        # Authenticated, so sealed by us; checked anyway so that a token of another format
        # fails closed instead of with a KeyError or TypeError below.
        if (
            not isinstance(claims, dict)
            or not claims.keys() >= _REQUIRED_CLAIMS
            or not claims.keys() <= _REQUIRED_CLAIMS | _OPTIONAL_CLAIMS
            or not all(_is_int(claims[name]) for name in ("v", "iat", "exp"))
            or not all(isinstance(claims[name], str) for name in _STRING_CLAIMS)
            or not isinstance(claims.get("p", ""), str)
        ):
            raise RequestStateError("malformed")
        return claims

    def _check(
        self, claims: dict[str, Any], *, method: Any, target: Any, arguments: Any, principal: str | None, now: float
    ) -> None:
        """Raise RequestStateError unless ``claims`` are current and belong to this request."""
        if claims["v"] != _VERSION:
            raise RequestStateError("unsupported version")
        if claims["iat"] > now + MAX_CLOCK_SKEW:
            raise RequestStateError("issued in the future")
        if now > claims["exp"]:
            raise RequestStateError(
                "expired",
                f"{_TOLD['expired']}: it is valid for {self._ttl:g} s after the round that issued it; {_START_AGAIN}",
            )
        if claims["aud"] != self._audience:
            raise RequestStateError("bound to another audience")
        if claims["m"] != method:
            raise RequestStateError("bound to another method")
        if claims["t"] != target:
            raise RequestStateError("bound to another target")
        # The arguments are the client's to fix: a retry repeats the request it answers.
        resend = (
            f"{_TOLD['bound to other arguments']}: send the arguments of the request that received it "
            f"again, or {_START_AGAIN}"
        )
        try:
            digest = _arguments_digest(arguments)
        except (TypeError, ValueError):
            # seal() refuses such arguments, so no token can be bound to them.
            raise RequestStateError("bound to other arguments", resend) from None
        if claims["a"] != digest:
            raise RequestStateError("bound to other arguments", resend)
        sealed_principal = claims.get("p")
        if (sealed_principal is None) != (principal is None):
            raise RequestStateError("bound to another principal")
        if principal is not None and sealed_principal != _principal_digest(principal):
            raise RequestStateError("bound to another principal")
