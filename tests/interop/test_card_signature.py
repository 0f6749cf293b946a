"""Signed agent cards (issue 21): the official SDK's verifier (`a2a.utils.signing`) accepts the
signatures of our strict 1.0 card and our 1.0 extended card, with the key from the JWK Set that
the signatures' `jku` names, and refuses a card with one changed byte."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from google.protobuf import json_format
from jwt.api_jwk import PyJWK

from conftest import KEY, Connector


def _header(card: dict[str, Any]) -> dict[str, Any]:
    protected = card['signatures'][0]['protected']
    return json.loads(base64.urlsafe_b64decode(protected + '=' * (-len(protected) % 4)))


async def _jwks_verifier(connect: Connector, jku: str):  # noqa: ANN202
    """The SDK's verifier, with a key provider that serves keys from our JWK Set at `jku`."""
    assert jku == connect.server.base + '/.well-known/jwks.json'
    async with connect.http() as http:
        answer = await http.get(jku)
    assert answer.status_code == 200
    keys = {key['kid']: key for key in answer.json()['keys']}
    assert all('d' not in key for key in keys.values()), 'no private key in the JWK Set'

    def key_provider(kid: str | None, url: str | None) -> PyJWK:
        assert url == jku
        return PyJWK(keys[kid])

    return create_signature_verifier(key_provider, ['EdDSA'])


def _parse(card: dict[str, Any]) -> AgentCard:
    # As the SDK's card resolver parses a fetched card.
    return json_format.ParseDict(card, AgentCard(), ignore_unknown_fields=True)


async def _check(connect: Connector, card: dict[str, Any]) -> None:
    header = _header(card)
    assert header['alg'] == 'EdDSA' and header['typ'] == 'JOSE' and header['kid']
    verify = await _jwks_verifier(connect, header['jku'])
    verify(_parse(card))  # raises when no signature verifies
    tampered = dict(card, name=card['name'] + '.')
    with pytest.raises(InvalidSignaturesError):
        verify(_parse(tampered))


async def test_card_signature_of_the_strict_card_verifies_with_the_sdk(connect: Connector) -> None:
    async with connect.http() as http:
        answer = await http.get(
            connect.server.base + '/.well-known/agent-card.json', headers={'A2A-Version': '1.0'}
        )
    assert answer.status_code == 200
    await _check(connect, answer.json())


async def test_card_signature_of_the_extended_card_verifies_with_the_sdk(connect: Connector) -> None:
    async with connect.http() as http:
        answer = await http.post(
            connect.server.base + '/a2a',
            headers={'A2A-Version': '1.0', 'X-API-Key': KEY},
            json={'jsonrpc': '2.0', 'id': 1, 'method': 'GetExtendedAgentCard', 'params': {}},
        )
    assert answer.status_code == 200
    await _check(connect, answer.json()['result'])


async def test_card_signature_absent_from_the_blended_card(connect: Connector) -> None:
    async with connect.http() as http:
        answer = await http.get(connect.server.base + '/.well-known/agent-card.json')
    assert 'signatures' not in answer.json()
