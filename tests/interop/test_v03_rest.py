"""A2A 0.3 over HTTP+JSON: the SDK's 0.3 compat REST client (CompatRestTransport), picked from
the card's 0.3 HTTP+JSON interface, and raw 0.3 proto-JSON requests without A2A-Version. Every
0.3 answer is parsed strictly with the SDK's 0.3 protobuf types (wire.py)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from conftest import KEY, Connector
from support import STEP_TIMEOUT, TERMINAL, collect, faux, response_text, send, send_request, state_name
from test_push import Webhook, webhook  # noqa: F401  (the fixture)
from wire import REST_PREFIX, Exchange


def rest_calls(exchanges: list[Exchange]) -> list[Exchange]:
    """Every A2A call of the test: all of them 0.3 REST under /a2a/v1, with A2A-Version: 0.3."""
    calls = [e for e in exchanges if not e.path.startswith('/.well-known/')]
    assert calls, 'no A2A call was made'
    for e in calls:
        assert e.path.startswith(REST_PREFIX + '/'), e.describe()
        assert e.request_headers.get('a2a-version') == '0.3', e.describe()
    return calls


async def test_v03_rest_client_send_get_and_errors(connect: Connector, wire: list[Exchange]) -> None:
    word = f'rest-{uuid.uuid4().hex[:8]}'
    async with connect.v03(streaming=False, binding='HTTP+JSON') as client:
        task = await send(client, send_request(word))
        async with asyncio.timeout(STEP_TIMEOUT):
            fetched = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=f'missing-{uuid.uuid4()}'))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED, state_name(task.status.state)
    text = response_text(task)
    assert text.startswith('echo: ') and text.rstrip().endswith(word), text
    assert fetched.id == task.id and fetched.context_id == task.context_id
    assert [p.text for p in fetched.history[0].parts] == [word]
    assert response_text(fetched) == text
    calls = rest_calls(wire)
    assert [(e.method, e.path.removeprefix(REST_PREFIX)) for e in calls] == [
        ('POST', '/message:send'),
        ('GET', f'/tasks/{task.id}'),
        ('GET', calls[2].path.removeprefix(REST_PREFIX)),
    ]
    # The SDK sends the 0.3 proto shape: the message under `request`, its parts under `content`.
    sent = json.loads(calls[0].request_body)
    assert sent['request']['content'] == [{'text': word}], sent


async def test_v03_rest_client_stream(connect: Connector, wire: list[Exchange]) -> None:
    async with connect.v03(streaming=True, binding='HTTP+JSON') as client:
        events = await collect(client.send_message(send_request(faux({'text': 'abcdef', 'chunk': 2}))))

    kinds = [e.WhichOneof('payload') for e in events]
    assert kinds[0] == 'task', kinds
    assert kinds[-1] == 'status_update', kinds
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    task = events[0].task
    for event in events:
        if event.HasField('artifact_update'):
            append_artifact_to_task(task, event.artifact_update)
    assert response_text(task) == 'abcdef'
    calls = rest_calls(wire)
    assert [e.path for e in calls] == [REST_PREFIX + '/message:stream']
    finals = [json.loads(d)['statusUpdate']['final'] for _, d in calls[0].sse_events() if 'statusUpdate' in d]
    assert finals[-1] is True and not any(finals[:-1]), finals


async def test_v03_rest_client_cancel(connect: Connector, wire: list[Exchange]) -> None:
    async with connect.v03(streaming=False, binding='HTTP+JSON') as client:
        started = await send(client, send_request(faux({'sleep_ms': 10000}), return_immediately=True))
        assert started.status.state not in TERMINAL, state_name(started.status.state)
        async with asyncio.timeout(STEP_TIMEOUT):
            canceled = await client.cancel_task(CancelTaskRequest(id=started.id))
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=started.id))

    assert canceled.id == started.id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED, state_name(canceled.status.state)
    answer = [e for e in rest_calls(wire) if e.path.endswith(':cancel')][0]
    assert answer.json()['status']['state'] == 'TASK_STATE_CANCELLED'


async def test_v03_rest_client_subscribe(connect: Connector, wire: list[Exchange]) -> None:
    script = faux({'sleep_ms': 2000}, {'text': 'woke up', 'chunk': 4})
    async with connect.v03(streaming=False, binding='HTTP+JSON') as starter:
        started = await send(starter, send_request(script, return_immediately=True))
    assert started.status.state not in TERMINAL, state_name(started.status.state)
    async with connect.v03(streaming=True, binding='HTTP+JSON') as client:
        events = await collect(client.subscribe(SubscribeToTaskRequest(id=started.id)))

    assert events[0].HasField('task') and events[0].task.id == started.id
    snapshot = events[0].task
    for event in events[1:]:
        if event.HasField('artifact_update'):
            append_artifact_to_task(snapshot, event.artifact_update)
    assert response_text(snapshot) == 'woke up'
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    rest_calls(wire)


async def test_v03_rest_client_push_config(
    connect: Connector, webhook: Webhook, wire: list[Exchange]  # noqa: F811
) -> None:
    async with connect.v03(streaming=False, binding='HTTP+JSON') as client:
        started = await send(
            client, send_request(faux({'sleep_ms': 800}, {'text': 'done late'}), return_immediately=True)
        )
        config = TaskPushNotificationConfig(
            task_id=started.id,
            id='hook-1',
            url=webhook.url,
            token='py-token-03',
            authentication=AuthenticationInfo(scheme='Bearer', credentials='py-cred-03'),
        )
        async with asyncio.timeout(STEP_TIMEOUT):
            created = await client.create_task_push_notification_config(config)
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=started.id, id='hook-1')
            )
        async with asyncio.timeout(STEP_TIMEOUT):
            while not any(b.get('status', {}).get('state') == 'completed' for _, _, b in webhook.received):
                await asyncio.sleep(0.02)

    assert (created.task_id, created.id, created.url) == (started.id, 'hook-1', webhook.url)
    assert (got.token, got.authentication.scheme, got.authentication.credentials) == (
        'py-token-03',
        'Bearer',
        'py-cred-03',
    )
    # A config registered through 0.3 gets the 0.3 task (PROTOCOL.md §10.4).
    _, headers, body = webhook.received[-1]
    assert body['kind'] == 'task' and body['id'] == started.id, body
    assert {k.lower(): v for k, v in headers.items()}['x-a2a-notification-token'] == 'py-token-03'
    rest_calls(wire)


async def test_v03_rest_client_extended_card(connect: Connector, wire: list[Exchange]) -> None:
    async with connect.v03(streaming=False, binding='HTTP+JSON') as client:
        async with asyncio.timeout(STEP_TIMEOUT):
            card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert card.name == 'Volcanic assistant'
    assert [e.path for e in rest_calls(wire)] == [REST_PREFIX + '/card']


async def test_v03_rest_raw_without_version_header(connect: Connector, wire: list[Exchange]) -> None:
    """A 0.3 REST client that sends no A2A-Version (the JS SDK's transport used on its own): a
    body in the 0.3 shape is answered in 0.3; a request without a body is answered in 1.0."""
    headers = {'X-API-Key': KEY}
    base = connect.server.base + REST_PREFIX
    word = f'raw-{uuid.uuid4().hex[:8]}'
    body = {
        'message': {'messageId': f'm-{uuid.uuid4()}', 'role': 'ROLE_USER', 'content': [{'text': word}]},
        'configuration': {'blocking': True},
    }
    async with connect.http() as http, asyncio.timeout(STEP_TIMEOUT):
        sent = await http.post(base + '/message:send', headers=headers, json=body)
        assert sent.status_code == 200, sent.text
        task = sent.json()['task']
        got = await http.get(f'{base}/tasks/{task["id"]}', headers=headers)
    assert task['history'][0]['content'] == [{'text': word}]
    assert task['status']['state'] == 'TASK_STATE_COMPLETED'
    assert got.json()['history'][0]['parts'] == [{'text': word}]
    assert all('a2a-version' not in e.request_headers for e in wire)
