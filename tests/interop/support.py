"""Helpers shared by the interop tests: messages, Faux directives, bounded stream reads."""

from __future__ import annotations

import asyncio
import json
import uuid

from collections.abc import AsyncIterator
from typing import Any

from a2a.client import Client
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text
from a2a.types.a2a_pb2 import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from wire import JSONRPC_PATH, REST_PREFIX, Exchange


STEP_TIMEOUT = 20.0
"""Upper bound for any single wait (a call, a whole stream)."""

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


def faux(*steps: dict[str, Any]) -> str:
    """A Faux directive line that scripts the agent's run."""
    return 'faux> ' + json.dumps({'steps': list(steps)})


def user_message(
    text: str, *, task_id: str | None = None, context_id: str | None = None
) -> Message:
    return Message(
        message_id=f'm-{uuid.uuid4()}',
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def send_request(
    text: str,
    *,
    task_id: str | None = None,
    context_id: str | None = None,
    return_immediately: bool | None = None,
) -> SendMessageRequest:
    configuration = SendMessageConfiguration()
    if return_immediately is not None:
        configuration.return_immediately = return_immediately
    return SendMessageRequest(
        message=user_message(text, task_id=task_id, context_id=context_id),
        configuration=configuration,
    )


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    """Every event of a stream until the server closes it, bounded by STEP_TIMEOUT."""
    events = []
    async with asyncio.timeout(STEP_TIMEOUT):
        async for event in stream:
            events.append(event)
    return events


async def send(client: Client, request: SendMessageRequest) -> Task:
    """A blocking send through a non-streaming client: exactly one event, a task."""
    events = await collect(client.send_message(request))
    assert len(events) == 1, events
    assert events[0].HasField('task'), events[0]
    return events[0].task


def response_text(task: Task) -> str:
    """The text of the task's `response` artifact (its parts concatenated)."""
    responses = [a for a in task.artifacts if a.name == 'response']
    assert len(responses) == 1, f'expected one response artifact: {task.artifacts}'
    return get_artifact_text(responses[0], delimiter='')


def status_text(task: Task) -> str:
    return get_message_text(task.status.message, delimiter='')


def state_name(state: int) -> str:
    return TaskState.Name(state)


def assert_binding(exchanges: list[Exchange], binding: str, version: str = '1.0') -> None:
    """Every A2A call of the test went over `binding` (the card fetch aside)."""
    calls = [e for e in exchanges if not e.path.startswith('/.well-known/')]
    assert calls, 'no A2A call was made'
    for e in calls:
        if binding == 'JSONRPC':
            assert e.path == JSONRPC_PATH and e.method == 'POST', e.describe()
        else:
            assert e.path.startswith(REST_PREFIX + '/'), e.describe()
        assert e.request_headers.get('a2a-version') == version, e.describe()
