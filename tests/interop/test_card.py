"""The public agent card, read by the SDK's A2ACardResolver."""

from __future__ import annotations

from a2a.types.a2a_pb2 import AgentCard
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
