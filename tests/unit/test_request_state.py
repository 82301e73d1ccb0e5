"""Sealed requestState tokens of multi round-trip requests (zemcp.eras.modern.request_state)."""

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from zemcp.eras.modern.request_state import (
    MAX_TOKEN_CHARS,
    RequestStateError,
    RequestStateSealer,
    StateTooLarge,
    new_key,
)

KEY = "k" * 40
OLD_KEY = "o" * 40
NOW = 1_800_000_000.0
TTL = 600
AUDIENCE = "zemcp-test"
REQUEST = {"method": "tools/call", "target": "book", "arguments": {"city": "Oslo", "seats": 2}}


def sealer(keys=(KEY,), ttl=TTL, audience=AUDIENCE):
    """A sealer with the test defaults."""
    return RequestStateSealer(list(keys), ttl, audience)


def seal(state="state", sealer_=None, now=NOW, **request):
    """A token for REQUEST (fields overridden by ``request``)."""
    return (sealer_ or sealer()).seal(state, **{**REQUEST, **request}, now=now)


def open_(token, sealer_=None, now=NOW, **request):
    """The state of ``token`` opened for REQUEST (fields overridden by ``request``)."""
    return (sealer_ or sealer()).open(token, **{**REQUEST, **request}, now=now)


def refused(token, sealer_=None, now=NOW, **request):
    """The reason ``token`` is refused for REQUEST (fields overridden by ``request``)."""
    with pytest.raises(RequestStateError) as caught:
        open_(token, sealer_, now, **request)
    return caught.value.reason


def raw_bytes(token):
    """The bytes behind the base64 part of ``token``."""
    body = token[len("v1.") :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def encode(raw):
    """A token for ``raw`` bytes, as the sealer formats it."""
    return "v1." + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def derived(secret=KEY):
    """The AES key the sealer derives from ``secret`` (same HKDF parameters as the module)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"zemcp request state v1").derive(secret.encode())


def decrypt(token, secret=KEY):
    """The plaintext claims of ``token``."""
    raw = raw_bytes(token)
    return json.loads(AESGCM(derived(secret)).decrypt(raw[4:16], raw[16:], b"v1." + raw[:4]))


def forge(claims, secret=KEY):
    """A validly encrypted token whose plaintext is ``claims`` (JSON-dumped unless bytes)."""
    key = derived(secret)
    kid = hashlib.sha256(key).digest()[:4]
    nonce = b"\x01" * 12
    plaintext = claims if isinstance(claims, bytes) else json.dumps(claims).encode()
    return encode(kid + nonce + AESGCM(key).encrypt(nonce, plaintext, b"v1." + kid))


def good_claims(**changes):
    """The claims a real seal of REQUEST at NOW holds, with ``changes`` applied (None deletes)."""
    claims = decrypt(seal())
    for name, value in changes.items():
        if value is None:
            del claims[name]
        else:
            claims[name] = value
    return claims


# --- round trips -------------------------------------------------------------------------------


def test_round_trip_returns_the_sealed_state():
    """A token opens for the same request and gives back the sealed state."""
    state = {"step": 2, "answers": {"seat": "12A"}}
    assert open_(seal(state)) == state


@pytest.mark.parametrize(
    "state",
    [
        None,
        True,
        False,
        0,
        -7,
        3.25,
        "",
        "text é ☃",
        [],
        [1, "a", None],
        {},
        {"nested": {"list": [{"x": 1}], "null": None}},
    ],
)
def test_any_json_value_survives_the_round_trip(state):
    """Every kind of JSON value, including null and non-ASCII text, comes back equal."""
    assert open_(seal(state)) == state


def test_token_has_the_v1_prefix_and_base64url_body():
    """The token is "v1." plus unpadded base64url, and the first 4 bytes are the key id."""
    token = seal()
    assert token.startswith("v1.")
    assert "=" not in token
    assert raw_bytes(token)[:4] == hashlib.sha256(derived()).digest()[:4]


def test_new_key_makes_distinct_usable_secrets():
    """new_key() gives long, distinct secrets that a sealer accepts."""
    first, second = new_key(), new_key()
    assert first != second and len(first) >= 32
    ring = sealer([first])
    assert open_(seal("x", ring), ring) == "x"


def test_open_uses_the_clock_when_now_is_omitted():
    """Without ``now`` both seal and open use the current time."""
    ring = sealer()
    token = ring.seal("x", **REQUEST)
    assert ring.open(token, **REQUEST) == "x"


# --- key rotation ------------------------------------------------------------------------------


def test_token_sealed_with_the_old_key_opens_after_rotation():
    """A ring [new, old] opens tokens sealed with old."""
    token = seal("x", sealer([OLD_KEY]))
    assert open_(token, sealer([KEY, OLD_KEY])) == "x"


def test_rotated_ring_seals_with_its_first_key():
    """A ring [new, old] seals with new: the token does not open with [old] alone."""
    token = seal("x", sealer([KEY, OLD_KEY]))
    assert refused(token, sealer([OLD_KEY])) == "unknown key"
    assert open_(token, sealer([KEY])) == "x"


def test_a_secret_listed_twice_is_accepted():
    """The same secret twice in the ring still seals and opens."""
    ring = sealer([KEY, KEY])
    assert open_(seal("x", ring), ring) == "x"


# --- tampering and garbage ---------------------------------------------------------------------


def test_changing_any_character_of_the_token_fails():
    """Replacing any one character of the token, prefix included, makes it refused."""
    token = seal({"secret": "value"})
    for index, char in enumerate(token):
        replacement = "B" if char != "B" else "C"
        with pytest.raises(RequestStateError):
            open_(token[:index] + replacement + token[index + 1 :])


def test_flipping_any_bit_of_the_decoded_bytes_fails():
    """Every byte of key id, nonce, ciphertext and tag is authenticated."""
    raw = raw_bytes(seal({"secret": "value"}))
    for index in range(len(raw)):
        for bit in (0x01, 0x80):
            altered = bytearray(raw)
            altered[index] ^= bit
            reason = refused(encode(bytes(altered)))
            assert reason == ("unknown key" if index < 4 else "tampered")


@pytest.mark.parametrize("token", [None, 1, 1.5, True, [], {}, {"requestState": "v1.x"}, b"v1.abc"])
def test_non_string_token_fails(token):
    """Anything but a string is refused as malformed."""
    assert refused(token) == "malformed"


@pytest.mark.parametrize(
    "token",
    [
        "",
        "v1.",
        "v1",
        "v2.",
        "V1.AAAA",
        "x",
        "   ",
        "v1.!!!!",
        "v1.AA==",
        "v1.A",
        "v1.AAAA AAAA",
        "v1.AAAA\n",
        "v1.ÀÀÀÀ",
        "v1.+/+/",
    ],
)
def test_garbage_and_wrong_prefix_fail(token):
    """Empty strings, other prefixes and text that is not unpadded base64url are refused."""
    assert refused(token) == "malformed"


def test_wrong_prefix_on_a_real_token_fails():
    """A real body behind another prefix, or with no prefix, is refused."""
    token = seal()
    for other in ("v2." + token[3:], token[3:], "V1." + token[3:], " " + token):
        assert refused(other) == "malformed"


def test_truncated_token_fails():
    """Any proper prefix of a token is refused."""
    token = seal()
    for end in range(len(token)):
        with pytest.raises(RequestStateError):
            open_(token[:end])


def test_too_short_for_key_id_nonce_and_tag_fails():
    """Bytes shorter than key id + nonce + tag (32) are malformed, even with a known key id."""
    kid = raw_bytes(seal())[:4]
    assert refused(encode(kid + b"\x00" * 27)) == "malformed"


def test_non_canonical_base64_fails():
    """A body whose spare bits are not zero decodes to the same bytes but is refused."""
    token = seal()
    body = token[3:]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    spare_bits = {2: 4, 3: 2}[len(body) % 4]  # unused low bits in the last character
    last = alphabet.index(body[-1])
    assert last % (1 << spare_bits) == 0
    variant = "v1." + body[:-1] + alphabet[last + 1]
    assert raw_bytes(variant) == raw_bytes(token)
    assert refused(variant) == "malformed"


def test_overlong_token_is_refused_before_decoding():
    """A token above MAX_TOKEN_CHARS is refused as too long, whatever it holds."""
    assert refused("v1." + "A" * MAX_TOKEN_CHARS) == "too long"


def test_sealing_a_state_too_large_to_open_fails():
    """seal() refuses a state whose token open() would refuse."""
    with pytest.raises(StateTooLarge, match="more than the limit"):
        seal("x" * MAX_TOKEN_CHARS)


def test_a_state_too_deep_to_open_is_refused_when_sealed():
    """seal() refuses a state (or arguments) nested too deeply for open() to parse, naming why."""
    deep: object = {}
    for _ in range(990):
        deep = {"a": deep}
    with pytest.raises(StateTooLarge, match="nested too deeply"):
        seal(deep)
    with pytest.raises(StateTooLarge, match="nested too deeply"):
        RequestStateSealer([KEY], TTL, "aud").seal({}, method="m", target="t", arguments=[[[deep]]])


@pytest.mark.parametrize("plaintext", [b"not json", b"\xff\xfe", b"[1,2]", b'"text"', b"null", b"{}"])
def test_authentic_but_not_a_claims_object_fails(plaintext):
    """Correctly encrypted bytes that are not a JSON object of claims are malformed."""
    assert refused(forge(plaintext)) == "malformed"


@pytest.mark.parametrize(
    "changes",
    [
        {"s": None},
        {"m": None},
        {"a": None},
        {"exp": None},
        {"iat": "now"},
        {"exp": 1.5e9},
        {"v": True},
        {"m": 1},
        {"aud": None},
        {"aud": ["x"]},
        {"p": 5},
        {"extra": "member"},
    ],
)
def test_claims_of_the_wrong_shape_fail(changes):
    """Missing members, wrong member types (bools are not ints) and unknown members are malformed."""
    assert refused(forge(good_claims(**changes))) == "malformed"


def test_well_formed_forged_claims_open():
    """The forging helper reproduces a real token (so the shape tests test the shape only)."""
    assert open_(forge(good_claims(s={"ok": 1}))) == {"ok": 1}


def test_other_claims_version_fails():
    """A claims object with another ``v`` is refused."""
    assert refused(forge(good_claims(v=2))) == "unsupported version"


# --- time --------------------------------------------------------------------------------------


def test_token_opens_until_its_ttl_has_passed():
    """A token opens at issue time and exactly ttl seconds later."""
    token = seal()
    assert open_(token, now=NOW) == "state"
    assert open_(token, now=NOW + TTL) == "state"


def test_expired_token_fails():
    """A token opened more than ttl seconds after sealing is refused as expired."""
    assert refused(seal(), now=NOW + TTL + 1) == "expired"


def test_fractional_ttl_rounds_the_expiry_up():
    """A fractional ttl never shortens the lifetime below ttl."""
    ring = sealer(ttl=0.5)
    token = seal(sealer_=ring, now=NOW + 0.75)
    assert open_(token, ring, now=NOW + 1.25) == "state"
    assert refused(token, ring, now=NOW + 2.5) == "expired"


def test_token_issued_in_the_future_fails():
    """A token whose iat is more than 60 s after the opener's clock is refused."""
    assert refused(seal(now=NOW + 61), now=NOW) == "issued in the future"


def test_small_clock_skew_is_tolerated():
    """A token issued up to 60 s ahead of the opener's clock still opens."""
    assert open_(seal(now=NOW + 60), now=NOW) == "state"


# --- binding -----------------------------------------------------------------------------------


def test_other_method_fails():
    """A token from tools/call does not open for prompts/get."""
    assert refused(seal(), method="prompts/get") == "bound to another method"


def test_other_target_fails():
    """A token for one tool does not open for another."""
    assert refused(seal(), target="cancel") == "bound to another target"


@pytest.mark.parametrize(
    "arguments",
    [
        {"city": "Oslo", "seats": 3},
        {"city": "Oslo"},
        {"city": "Oslo", "seats": 2, "more": True},
        {},
        None,
        {"city": "Oslo", "seats": "2"},
    ],
)
def test_other_arguments_fail(arguments):
    """Any change of the arguments, or dropping them, makes the token refused."""
    assert refused(seal(), arguments=arguments) == "bound to other arguments"


def test_same_arguments_in_another_key_order_open():
    """Arguments are compared as canonical JSON: key order does not matter."""
    token = seal(arguments={"b": {"y": 1, "x": [2, {"q": 1, "p": 0}]}, "a": "é"})
    assert open_(token, arguments={"a": "é", "b": {"x": [2, {"p": 0, "q": 1}], "y": 1}}) == "state"


def test_arguments_that_are_not_json_fail_to_open():
    """Retried arguments that cannot be canonical JSON match no token."""
    assert refused(seal(), arguments={"x": float("nan")}) == "bound to other arguments"
    assert refused(seal(), arguments={"x": object()}) == "bound to other arguments"


def test_sealing_arguments_that_are_not_json_fails():
    """seal() refuses arguments or state that cannot be JSON."""
    with pytest.raises(ValueError):
        seal(arguments={"x": float("inf")})
    with pytest.raises(TypeError):
        seal(state={"x": object()})


def test_other_audience_fails():
    """A token sealed by one server does not open on another with the same key."""
    assert refused(seal(), sealer(audience="other-server")) == "bound to another audience"


def test_same_principal_opens():
    """A token bound to a principal opens for that principal."""
    assert open_(seal(principal="alice"), principal="alice") == "state"


def test_other_principal_fails():
    """A token bound to one principal does not open for another."""
    assert refused(seal(principal="alice"), principal="bob") == "bound to another principal"


def test_principal_on_one_side_only_fails():
    """A principal at seal but not at open, or the other way round, makes the token refused."""
    assert refused(seal(principal="alice")) == "bound to another principal"
    assert refused(seal(), principal="alice") == "bound to another principal"


def test_only_a_digest_of_the_principal_is_stored():
    """The claims carry ``p`` only with a principal, and never the principal itself."""
    principal = "user-7f3a9c-distinctive@example.org"
    claims = decrypt(seal(principal=principal))
    assert "p" in claims and principal not in json.dumps(claims)
    assert "p" not in decrypt(seal())


def test_claims_hold_the_binding():
    """The plaintext claims are the documented envelope."""
    claims = decrypt(seal({"k": 1}))
    assert claims["v"] == 1 and claims["iat"] == int(NOW) and claims["exp"] == int(NOW) + TTL
    assert (claims["m"], claims["t"], claims["aud"], claims["s"]) == ("tools/call", "book", AUDIENCE, {"k": 1})
    canonical = json.dumps(REQUEST["arguments"], sort_keys=True, separators=(",", ":")).encode()
    expected = base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()[:16]).rstrip(b"=").decode()
    assert claims["a"] == expected


# --- confidentiality ---------------------------------------------------------------------------


def test_state_is_encrypted():
    """A distinctive string in the state appears neither in the token nor in its decoded bytes."""
    marker = "ZZ-distinctive-marker-4711"
    token = seal({"note": marker}, target="marker-target")
    assert marker not in token
    raw = raw_bytes(token)
    assert marker.encode() not in raw and b"marker-target" not in raw and b'"s"' not in raw


def test_two_seals_of_the_same_state_differ():
    """A random nonce makes every token unique, even for the same state, request and time."""
    tokens = {seal({"same": 1}) for _ in range(20)}
    assert len(tokens) == 20
    assert len({raw_bytes(token)[4:16] for token in tokens}) == 20


# --- errors and settings -----------------------------------------------------------------------


def refusal_message(token, **request) -> str:
    """What the client is told when ``token`` is refused for REQUEST (fields overridden by ``request``)."""
    with pytest.raises(RequestStateError) as caught:
        open_(token, **request)
    return str(caught.value)


def assert_tells_nothing_secret(message: str, token: str) -> None:
    """No part of the token, the key, the state or a claim's value is in ``message``."""
    assert KEY not in message and "Oslo" not in message and token[3:20] not in message
    assert '"a"' not in message and "digest" not in message


def test_a_tampered_state_is_told_as_tampered():
    """A changed character fails the integrity check, and the message says so."""
    token = seal({"city": "Oslo"})
    tampered = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    message = refusal_message(tampered)
    assert message == (
        "requestState was tampered with: it fails its integrity check; "
        "start the request again without requestState and inputResponses"
    )
    assert_tells_nothing_secret(message, token)


def test_an_expired_state_is_told_as_expired_with_its_lifetime():
    """Past its ttl the message says it expired, and how long a state lives."""
    token = seal({"city": "Oslo"})
    message = refusal_message(token, now=NOW + TTL + 2)
    assert message == (
        f"requestState expired: it is valid for {TTL} s after the round that issued it; "
        "start the request again without requestState and inputResponses"
    )
    assert_tells_nothing_secret(message, token)


@pytest.mark.parametrize("arguments", [{"city": "Bergen", "seats": 2}, {"bad": float("nan")}])
def test_a_state_sent_with_other_arguments_is_told_so(arguments):
    """Other arguments (or none a state could be bound to): the message says to resend the original ones."""
    token = seal({"city": "Oslo"})
    message = refusal_message(token, arguments=arguments)
    assert message == (
        "requestState was issued for other arguments: send the arguments of the request that received it "
        "again, or start the request again without requestState and inputResponses"
    )
    assert_tells_nothing_secret(message, token)


@pytest.mark.parametrize(
    "token, request_, told",
    [
        (lambda: 5, {}, "requestState is malformed"),
        (lambda: "v1." + "A" * (MAX_TOKEN_CHARS), {}, "requestState is longer than any this server issues"),
        (lambda: seal(sealer_=sealer(keys=(OLD_KEY,))), {}, "requestState names a key this server does not hold"),
        (lambda: seal(now=NOW + 3600), {}, "requestState is dated in the future"),
        (lambda: seal(sealer_=sealer(audience="other")), {}, "requestState was issued by another server"),
        (lambda: seal(), {"method": "prompts/get"}, "requestState was issued for another method"),
        (lambda: seal(), {"target": "other"}, "requestState was issued for another tool, prompt or resource"),
        (lambda: seal(principal="alice"), {"principal": "bob"}, "requestState was issued to other credentials"),
    ],
)
def test_every_other_refusal_says_which_check_failed(token, request_, told):
    """Each reason has its own message, which ends with what to do."""
    made = token()
    message = refusal_message(made, **request_)
    assert message.startswith(told), message
    assert message.endswith("; start the request again without requestState and inputResponses"), message
    assert "alice" not in message and "bob" not in message and KEY not in message


@pytest.mark.parametrize("keys", [["short"], [KEY, "x" * 31], ["x" * 31]])
def test_short_key_is_refused_without_echoing_it(keys):
    """A secret under 32 characters is refused; the message names the setting, not the secret."""
    with pytest.raises(ValueError) as caught:
        RequestStateSealer(keys, TTL, AUDIENCE)
    message = str(caught.value)
    assert "ZEMCP_REQUEST_STATE_KEY" in message and "32 characters" in message
    assert all(secret not in message for secret in keys)


def test_key_of_exactly_32_characters_is_accepted():
    """32 characters is the minimum and is enough."""
    ring = sealer(["s" * 32])
    assert open_(seal(sealer_=ring), ring) == "state"


@pytest.mark.parametrize("keys", [[], (), [None], [b"b" * 40]])
def test_missing_or_non_string_keys_are_refused(keys):
    """An empty ring, or a secret that is not a string, is refused naming the setting."""
    with pytest.raises(ValueError, match="ZEMCP_REQUEST_STATE_KEY"):
        RequestStateSealer(keys, TTL, AUDIENCE)


def test_a_single_string_instead_of_a_list_is_refused():
    """Passing one secret as a bare string is refused with a hint, without echoing it."""
    with pytest.raises(ValueError, match="list") as caught:
        RequestStateSealer(KEY, TTL, AUDIENCE)
    assert KEY not in str(caught.value)


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "600", None, True])
def test_bad_ttl_is_refused(ttl):
    """ttl must be a finite number of seconds above 0."""
    with pytest.raises(ValueError, match="ttl"):
        RequestStateSealer([KEY], ttl, AUDIENCE)


@pytest.mark.parametrize("audience", ["", None, 5])
def test_bad_audience_is_refused(audience):
    """The audience must be a non-empty string."""
    with pytest.raises(ValueError, match="audience"):
        RequestStateSealer([KEY], TTL, audience)


def test_seal_refuses_non_string_request_fields():
    """method, target and principal must be strings (principal may be None)."""
    with pytest.raises(TypeError):
        seal(method=None)
    with pytest.raises(TypeError):
        seal(target=5)
    with pytest.raises(TypeError):
        seal(principal=7)
