"""The echo agent on the official A2A Python SDK (a2a-sdk 1.x) and uvicorn, for bench/run.

Equivalent to `volcanic serve --faux` for the benchmark: every message becomes a task whose one
artifact ("response") holds the input text, completed; tasks live in the SDK's in-memory store
(its defaults: owner-scoped, copying); every A2A call needs `X-API-Key: <key>` (or
`Authorization: Bearer <key>`), the card does not. uvicorn runs with uvloop and httptools, its
fastest setup, and one worker (the server is pinned to one core).

Usage: python python_echo.py --port PORT --key KEY (listens on 127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import hmac

import uvicorn

from starlette.applications import Starlette
from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    SimpleUser,
)
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    SecurityRequirement,
    SecurityScheme,
)

CARD_PATH = '/.well-known/agent-card.json'


class EchoExecutor(AgentExecutor):
    """Answers every message with its text as the one artifact, then completes the task."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None, 'the SDK always passes the message to execute()'
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact(
            [new_text_part(context.get_user_input())],
            artifact_id='response',
            name='response',
            last_chunk=True,
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # An echo finishes before a cancel could reach it.
        return None


class KeyBackend(AuthenticationBackend):
    """The one caller's key, as X-API-Key or a bearer token; the card needs none."""

    def __init__(self, key: str) -> None:
        self._key = key.encode()

    async def authenticate(self, conn: HTTPConnection):  # noqa: ANN201
        if conn.url.path == CARD_PATH:
            return None
        given = conn.headers.get('x-api-key')
        if given is None:
            auth = conn.headers.get('authorization', '')
            given = auth.removeprefix('Bearer ') if auth.startswith('Bearer ') else None
        if given is None or not hmac.compare_digest(given.encode(), self._key):
            raise AuthenticationError('unknown key')
        # The caller's name is the owner scope of its tasks, as in Volcanic.
        return AuthCredentials(['caller']), SimpleUser('bench')


def refuse(conn: HTTPConnection, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {'error': str(exc)}, status_code=401, headers={'WWW-Authenticate': 'Bearer'}
    )


def build_app(port: int, key: str) -> Starlette:
    base = f'http://127.0.0.1:{port}'
    card = AgentCard(
        name='Echo agent (Python SDK)',
        description='Replies with the input text as one artifact; the benchmark reference.',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(url=f'{base}/a2a', protocol_binding='JSONRPC', protocol_version='1.0')
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            'apiKey': SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(location='header', name='X-API-Key')
            )
        },
        security_requirements=[SecurityRequirement(schemes={'apiKey': {}})],
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[AgentSkill(id='echo', name='Echo', description='Echoes the input.', tags=['echo'])],
    )
    handler = DefaultRequestHandlerV2(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, '/a2a')
    return Starlette(
        routes=routes,
        middleware=[Middleware(AuthenticationMiddleware, backend=KeyBackend(key), on_error=refuse)],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--key', required=True)
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.port, args.key),
        host='127.0.0.1',
        port=args.port,
        loop='uvloop',
        http='httptools',
        access_log=False,
        log_level='warning',
    )


if __name__ == '__main__':
    main()
