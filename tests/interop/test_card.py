"""The public agent card, read by the SDK's A2ACardResolver."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import AgentCard
from google.protobuf import json_format
from conftest import Connector


async def test_card_resolves_with_interfaces_and_capabilities(connect: Connector) -> None:
    card: AgentCard = await connect.card()
    base = connect.server.base

    assert card.name == 'Volcanic assistant'
    assert card.description
    assert card.version
    interfaces = [(i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces]
    assert interfaces == [
        ('JSONRPC', '1.0', f'{base}/a2a'),
        ('HTTP+JSON', '1.0', f'{base}/a2a/v1'),
        ('JSONRPC', '0.3', f'{base}/a2a'),
        ('HTTP+JSON', '0.3', f'{base}/a2a'),
    ]
    assert card.capabilities.streaming is True
    assert card.capabilities.push_notifications is True
    assert card.capabilities.extended_agent_card is True
    assert [s.id for s in card.skills] == ['chat']

    # The security declaration is what AuthInterceptor works from: an API key header and bearer.
    schemes = card.security_schemes
    assert schemes['apiKey'].api_key_security_scheme.location == 'header'
    assert schemes['apiKey'].api_key_security_scheme.name == 'X-API-Key'
    assert schemes['bearer'].http_auth_security_scheme.scheme.lower() == 'bearer'
    required = [sorted(r.schemes) for r in card.security_requirements]
    assert required == [['apiKey'], ['bearer']]


async def test_card_for_1_0_parses_strictly_with_the_sdk_types(connect: Connector) -> None:
    """A request naming 1.0 gets a card that the SDK's 1.0 protobuf type parses with unknown
    fields rejected; the card without a version carries the 0.3 fields and does not."""
    async with connect.http() as http:
        strict_answer = await http.get(
            connect.server.base + '/.well-known/agent-card.json', headers={'A2A-Version': '1.0'}
        )
        blended_answer = await http.get(connect.server.base + '/.well-known/agent-card.json')
    assert strict_answer.status_code == 200
    # Without A2A__PublicUrl the card's URLs come from Host and X-Forwarded-Proto, so it varies
    # by them too (and is private to the client's cache).
    assert strict_answer.headers['vary'] == 'A2A-Version, Host, X-Forwarded-Proto'
    assert strict_answer.headers['cache-control'] == 'private, max-age=300'
    card = json_format.Parse(strict_answer.text, AgentCard(), ignore_unknown_fields=False)
    assert card.name == 'Volcanic assistant'
    assert card.security_schemes['apiKey'].api_key_security_scheme.name == 'X-API-Key'
    assert [i.protocol_version for i in card.supported_interfaces] == ['1.0', '1.0', '0.3', '0.3']

    with pytest.raises(json_format.ParseError):
        json_format.Parse(blended_answer.text, AgentCard(), ignore_unknown_fields=False)
