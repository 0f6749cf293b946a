"""Push notifications through the SDK: a config registered with the SDK's client, and a local
webhook that receives the server's POSTs (the server runs with A2A__AllowPrivatePushUrls so a
127.0.0.1 webhook is allowed)."""

from __future__ import annotations

import asyncio
import json
import threading

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    GetTaskPushNotificationConfigRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import ParseDict

from conftest import Connector
from support import STEP_TIMEOUT, faux, send, send_request
from wire import Exchange


class Webhook:
    """A webhook on 127.0.0.1 that records every POST (path, headers, JSON body)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], dict]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get('Content-Length', '0'))
                body = json.loads(self.rfile.read(length) or b'{}')
                with outer.lock:
                    outer.received.append((self.path, dict(self.headers.items()), body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}/hook'
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def states(self) -> list[str]:
        with self.lock:
            return [body['task']['status']['state'] for _, _, body in self.received]

    async def wait_for(self, state: str) -> None:
        async with asyncio.timeout(STEP_TIMEOUT):
            while state not in self.states():
                await asyncio.sleep(0.02)


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.server.shutdown()


async def test_push_config_registered_by_sdk_delivers_notifications(
    connect: Connector, binding: str, webhook: Webhook, wire: list[Exchange]
) -> None:
    async with connect(binding, streaming=False) as client:
        # A run long enough to register the webhook while it works.
        started = await send(
            client, send_request(faux({'sleep_ms': 800}, {'text': 'done late'}), return_immediately=True)
        )
        config = TaskPushNotificationConfig(
            task_id=started.id,
            url=webhook.url,
            token='py-token-1',
            authentication=AuthenticationInfo(scheme='Bearer', credentials='py-cred-1'),
        )
        async with asyncio.timeout(STEP_TIMEOUT):
            created = await client.create_task_push_notification_config(config)
        assert created.id, 'the server assigns an id'
        assert created.url == webhook.url
        await webhook.wait_for('TASK_STATE_COMPLETED')
        async with asyncio.timeout(STEP_TIMEOUT):
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=started.id, id=created.id)
            )
        assert got.token == 'py-token-1'

    with webhook.lock:
        received = list(webhook.received)
    last_path, last_headers, last_body = received[-1]
    assert last_path == '/hook'
    headers = {k.lower(): v for k, v in last_headers.items()}
    assert headers['x-a2a-notification-token'] == 'py-token-1'
    assert headers['authorization'] == 'Bearer py-cred-1'
    # The payload is a StreamResponse the SDK parses strictly, carrying the whole task.
    event = ParseDict(last_body, StreamResponse())
    assert event.HasField('task')
    assert event.task.id == started.id
    assert event.task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_push_config_inline_in_send_message(
    connect: Connector, binding: str, webhook: Webhook, wire: list[Exchange]
) -> None:
    request = send_request('hello push')
    request.configuration.task_push_notification_config.CopyFrom(
        TaskPushNotificationConfig(url=webhook.url, token='inline-token')
    )
    async with connect(binding, streaming=False) as client:
        task = await send(client, request)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    await webhook.wait_for('TASK_STATE_COMPLETED')
    assert webhook.states() == ['TASK_STATE_WORKING', 'TASK_STATE_COMPLETED']
