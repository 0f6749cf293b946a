"""A test agent on the official A2A Python SDK (a2a-sdk, pinned in tests/interop/requirements.txt)
for `volcanic a2a` (test_client_sdk.py): JSON-RPC and HTTP+JSON, each at 1.0 and, through the
SDK's compatibility adapters, 0.3; streaming, push config CRUD (in-memory store) and the
behaviours the client has to show, chosen by the message text:

- `ask`: input-required with the question "Which city?"; the answer completes the task with
  "going to <answer>".
- `slow`: works until canceled.
- `stream`: an answer in three appended chunks ("one two three"), with a status message first.
- anything else: the text back as the artifact "response"; every file part comes back as an
  artifact file named "echo-<name>" with the same bytes.

Every A2A call needs `X-API-Key: <key>` (or `Authorization: Bearer <key>`); the card does not.
Usage: python python_agent.py --key KEY (listens on 127.0.0.1 only; prints
`python-agent: listening on http://127.0.0.1:PORT` once it accepts connections).
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import socket
import sys

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

from a2a.helpers.proto_helpers import (
    get_message_text,
    new_raw_part,
    new_task_from_user_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryPushNotificationConfigStore, InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    TaskState,
)

CARD_PATH = '/.well-known/agent-card.json'


class TestExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None, 'the SDK always passes the message to execute()'
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = get_message_text(message).strip()
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f'going to {text}')], name='response')
            await updater.complete()
        elif text == 'ask':
            await updater.requires_input(updater.new_agent_message([new_text_part('Which city?')]))
        elif text == 'slow':
            await updater.start_work()
            while True:
                await asyncio.sleep(0.1)
        elif text == 'stream':
            await updater.start_work(updater.new_agent_message([new_text_part('thinking')]))
            for index, word in enumerate(['one ', 'two ', 'three']):
                await updater.add_artifact(
                    [new_text_part(word)],
                    artifact_id='answer',
                    name='response',
                    append=index > 0,
                    last_chunk=index == 2,
                )
                await asyncio.sleep(0.05)
            await updater.complete()
        else:
            await updater.add_artifact([new_text_part(text)], artifact_id='response', name='response')
            for index, part in enumerate(p for p in message.parts if p.WhichOneof('content') == 'raw'):
                await updater.add_artifact(
                    [new_raw_part(part.raw, media_type=part.media_type, filename=f'echo-{part.filename}')],
                    artifact_id=f'file-{index}',
                    name=f'echo-{part.filename}',
                )
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        assert task is not None, 'the SDK cancels existing tasks only'
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


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
        return AuthCredentials(['caller']), SimpleUser('tester')


def refuse(conn: HTTPConnection, exc: Exception) -> JSONResponse:
    return JSONResponse({'error': str(exc)}, status_code=401, headers={'WWW-Authenticate': 'Bearer'})


def build_app(port: int, key: str) -> Starlette:
    base = f'http://127.0.0.1:{port}'
    interfaces = [
        AgentInterface(url=f'{base}/a2a', protocol_binding='JSONRPC', protocol_version='1.0'),
        AgentInterface(url=f'{base}/rest', protocol_binding='HTTP+JSON', protocol_version='1.0'),
        AgentInterface(url=f'{base}/a2a', protocol_binding='JSONRPC', protocol_version='0.3'),
        AgentInterface(url=f'{base}/rest', protocol_binding='HTTP+JSON', protocol_version='0.3'),
    ]
    card = AgentCard(
        name='Test agent (Python SDK)',
        description='The behaviours volcanic a2a is tested with.',
        version='1.0.0',
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={
            'apiKey': SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(location='header', name='X-API-Key')
            )
        },
        security_requirements=[SecurityRequirement(schemes={'apiKey': {}})],
        default_input_modes=['text/plain', 'application/octet-stream'],
        default_output_modes=['text/plain', 'application/octet-stream'],
        skills=[AgentSkill(id='test', name='Test', description='Test behaviours.', tags=['test'])],
    )
    handler = DefaultRequestHandlerV2(
        agent_executor=TestExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=InMemoryPushNotificationConfigStore(),
    )
    routes = (
        create_agent_card_routes(card)
        + create_jsonrpc_routes(handler, '/a2a', enable_v0_3_compat=True)
        + create_rest_routes(handler, enable_v0_3_compat=True, path_prefix='/rest')
    )
    return Starlette(
        routes=routes,
        middleware=[Middleware(AuthenticationMiddleware, backend=KeyBackend(key), on_error=refuse)],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--key', required=True)
    args = parser.parse_args()
    # The port is picked here and the socket handed to uvicorn, so the card can name it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.listen(128)
    config = uvicorn.Config(build_app(port, args.key), access_log=False, log_level='warning')
    server = uvicorn.Server(config)
    print(f'python-agent: listening on http://127.0.0.1:{port}', flush=True)
    server.run(sockets=[sock])
    sys.exit(0)


if __name__ == '__main__':
    main()
