"""SendMessage and SendStreamingMessage through the SDK client, over JSON-RPC and HTTP+JSON."""

from __future__ import annotations

import uuid

import pytest

from a2a.client import A2AClientError
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import Role, Task, TaskState
from conftest import KEY, Connector
from support import (
    assert_binding,
    collect,
    faux,
    response_text,
    send,
    send_request,
    state_name,
    status_text,
)
from wire import Exchange


async def test_send_blocking_completes_with_response_artifact(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    word = f'hello-{uuid.uuid4().hex[:8]}'
    async with connect(binding, streaming=False) as client:
        task = await send(client, send_request(word))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED, state_name(task.status.state)
    assert task.id and task.context_id
    assert task.status.HasField('timestamp')
    text = response_text(task)
    assert text.startswith('echo: '), text
    assert '[A2A message from "py-bot", an external agent' in text, text
    assert text.rstrip().endswith(word), text
    assert_binding(wire, binding)


async def test_bearer_key_from_the_card_scheme(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    async with connect(binding, streaming=False, scheme='bearer') as client:
        task = await send(client, send_request('via bearer'))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    calls = [e for e in wire if not e.path.startswith('/.well-known/')]
    assert calls and all(e.request_headers.get('authorization') == f'Bearer {KEY}' for e in calls)
    assert all('x-api-key' not in e.request_headers for e in calls)


async def test_send_streaming_events_in_order(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    async with connect(binding, streaming=True) as client:
        events = await collect(client.send_message(send_request(faux({'text': 'abcdef', 'chunk': 2}))))

    kinds = [e.WhichOneof('payload') for e in events]
    assert kinds[0] == 'task', kinds
    assert kinds[-1] == 'status_update', kinds
    assert 'artifact_update' in kinds, kinds
    first_artifact = kinds.index('artifact_update')
    assert all(k in ('status_update', 'artifact_update') for k in kinds[1:]), kinds

    task: Task = events[0].task
    assert task.id and task.context_id
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    for event in events[1:]:
        update = getattr(event, event.WhichOneof('payload'))
        assert update.task_id == task.id
        assert update.context_id == task.context_id

    # Every status before the last is non-terminal; the last one is the terminal `completed`.
    statuses = [e.status_update.status.state for e in events if e.HasField('status_update')]
    assert statuses[-1] == TaskState.TASK_STATE_COMPLETED, [state_name(s) for s in statuses]
    assert all(s == TaskState.TASK_STATE_WORKING for s in statuses[:-1]), statuses
    last_artifact = len(kinds) - 1 - kinds[::-1].index('artifact_update')
    assert first_artifact < last_artifact < len(kinds) - 1

    # The SDK's own aggregation (append semantics) rebuilds the answer from the chunks.
    chunks = [e.artifact_update for e in events if e.HasField('artifact_update')]
    assert len(chunks) >= 3, chunks
    for update in chunks:
        append_artifact_to_task(task, update)
    assert response_text(task) == 'abcdef'
    assert_binding(wire, binding)


async def test_input_required_then_continue_same_task(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    ask = faux({'tool': 'request_input', 'args': {'question': 'Which city?'}})
    async with connect(binding, streaming=False) as client:
        asked = await send(client, send_request(ask))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, state_name(
            asked.status.state
        )
        assert status_text(asked) == 'Which city?'
        assert asked.status.message.task_id == asked.id
        assert asked.status.message.context_id == asked.context_id

        answered = await send(client, send_request('Paris', task_id=asked.id))

    assert answered.status.state == TaskState.TASK_STATE_COMPLETED, state_name(
        answered.status.state
    )
    assert answered.id == asked.id
    assert answered.context_id == asked.context_id
    assert 'Paris' in response_text(answered)
    # The history is the conversation in order, as the SDK's own task manager keeps it: the
    # request, the question, the answer; the run's `using request_input` progress line is a
    # status update, not part of it.
    turns = [(m.role, ''.join(p.text for p in m.parts)) for m in answered.history]
    assert turns == [
        (Role.ROLE_USER, ask),
        (Role.ROLE_AGENT, 'Which city?'),
        (Role.ROLE_USER, 'Paris'),
    ], turns
    assert_binding(wire, binding)


async def test_unknown_key_is_refused_with_401(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    async with connect(binding, key='k_nobody_knows_this', streaming=False) as client:
        with pytest.raises(A2AClientError, match='401'):
            await send(client, send_request('let me in'))

    refused = [e for e in wire if not e.path.startswith('/.well-known/')]
    assert [e.status for e in refused] == [401]
    assert 'www-authenticate' in refused[0].headers
