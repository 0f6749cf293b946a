"""Safe retries (issue 21) through the SDK client: sending the same message twice, as a client
that lost the first answer does, gives the same task and one run; the same messageId with
another message is refused with InvalidParams."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import InvalidParamsError
from conftest import Connector
from support import (
    STEP_TIMEOUT,
    assert_binding,
    collect,
    faux,
    response_text,
    send,
    send_request,
    state_name,
)
from wire import Exchange


async def test_same_message_twice_is_one_task_and_one_run(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    request = send_request(f'retry-{uuid.uuid4().hex[:8]}')
    async with connect(binding, streaming=False) as client:
        first = await send(client, request)
        again = await send(client, request)

    assert first.status.state == TaskState.TASK_STATE_COMPLETED, state_name(first.status.state)
    assert again.id == first.id
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    # Nothing ran again: the history holds the one user message and the one answer.
    assert again.history == first.history
    assert response_text(again) == response_text(first)
    assert_binding(wire, binding)


async def test_same_message_while_it_runs_streams_the_same_task(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    request = send_request(faux({'sleep_ms': 1000}, {'text': 'slow answer'}))
    async with connect(binding, streaming=True) as client:
        stream = client.send_message(request)
        async with asyncio.timeout(STEP_TIMEOUT):
            # The repeat goes out once the first send's task exists (its first event).
            first_events = [await anext(stream)]
            again = await collect(client.send_message(request))
            first_events += [event async for event in stream]

    for events in (first_events, again):
        assert events[0].HasField('task'), events[0]
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, events
    assert again[0].task.id == first_events[0].task.id
    # The repeat joined the run in progress (not refused as "context busy"): it sees the answer
    # stream as the first send does.
    assert again[0].task.status.state == TaskState.TASK_STATE_WORKING, again[0]
    assert [e for e in again if e.HasField('artifact_update')], again
    assert_binding(wire, binding)


async def test_same_message_id_with_another_message_is_invalid_params(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    request = send_request('the first message')
    changed = SendMessageRequest(
        message=Message(
            message_id=request.message.message_id,
            role=Role.ROLE_USER,
            parts=[Part(text='another message')],
        )
    )
    async with connect(binding, streaming=False) as client:
        await send(client, request)
        with pytest.raises(InvalidParamsError, match='already used for a different message'):
            await send(client, changed)
    assert_binding(wire, binding)
