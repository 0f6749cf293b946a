"""A2A 0.3 over JSON-RPC: the SDK's 0.3 compat client, and raw 0.3 requests checked with the
SDK's 0.3 pydantic models (as a 0.3-only client that sends no A2A-Version header)."""

from __future__ import annotations

import asyncio
import json
import uuid

from typing import Any

import pytest

from a2a.compat.v0_3 import types as v03
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from a2a.utils.errors import TaskNotFoundError
from conftest import KEY, Connector
from support import STEP_TIMEOUT, collect, faux, response_text, send, send_request, state_name
from wire import Exchange, parse_sse


def rpc_methods(exchanges: list[Exchange]) -> list[str | None]:
    return [e.rpc_method() for e in exchanges if not e.path.startswith('/.well-known/')]


async def test_v03_client_send_and_get(connect: Connector, wire: list[Exchange]) -> None:
    word = f'legacy-{uuid.uuid4().hex[:8]}'
    async with connect.v03(streaming=False) as client:
        task = await send(client, send_request(word))
        async with asyncio.timeout(STEP_TIMEOUT):
            fetched = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=f'missing-{uuid.uuid4()}'))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED, state_name(task.status.state)
    text = response_text(task)
    assert text.startswith('echo: ') and text.rstrip().endswith(word), text
    assert fetched.id == task.id and fetched.context_id == task.context_id
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(fetched.history) == 1
    assert response_text(fetched) == text
    assert rpc_methods(wire) == ['message/send', 'tasks/get', 'tasks/get']
    calls = [e for e in wire if not e.path.startswith('/.well-known/')]
    assert all(e.request_headers.get('a2a-version') == '0.3' for e in calls)


async def test_v03_client_stream(connect: Connector, wire: list[Exchange]) -> None:
    async with connect.v03(streaming=True) as client:
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
    assert rpc_methods(wire) == ['message/stream']


def v03_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {'jsonrpc': '2.0', 'id': str(uuid.uuid4()), 'method': method, 'params': params}


def v03_message(text: str) -> dict[str, Any]:
    return {
        'kind': 'message',
        'messageId': f'm-{uuid.uuid4()}',
        'role': 'user',
        'parts': [{'kind': 'text', 'text': text}],
    }


async def test_v03_raw_without_version_header(connect: Connector, wire: list[Exchange]) -> None:
    """What a 0.3-only client sends: 0.3 methods, `kind`-tagged parts, no A2A-Version header."""
    url = connect.server.base + '/a2a'
    headers = {'X-API-Key': KEY}
    word = f'raw-{uuid.uuid4().hex[:8]}'
    async with connect.http() as http, asyncio.timeout(STEP_TIMEOUT):
        sent = await http.post(
            url, headers=headers, json=v03_request('message/send', {'message': v03_message(word)})
        )
        assert sent.status_code == 200, sent.text
        send_response = v03.SendMessageSuccessResponse.model_validate(sent.json())
        task = send_response.result
        assert isinstance(task, v03.Task), task
        assert task.kind == 'task'
        assert task.status.state == v03.TaskState.completed
        response = [a for a in task.artifacts or [] if a.name == 'response']
        assert len(response) == 1
        text = ''.join(p.root.text for p in response[0].parts if isinstance(p.root, v03.TextPart))
        assert text.rstrip().endswith(word), text

        got = await http.post(
            url, headers=headers, json=v03_request('tasks/get', {'id': task.id, 'historyLength': 1})
        )
        fetched = v03.GetTaskSuccessResponse.model_validate(got.json()).result
        assert fetched.id == task.id and fetched.context_id == task.context_id
        assert len(fetched.history or []) == 1
        assert fetched.history[0].kind == 'message'

        streamed = await http.post(
            url,
            headers=headers,
            json=v03_request(
                'message/stream', {'message': v03_message(faux({'text': 'xyz', 'chunk': 1}))}
            ),
        )
        assert streamed.headers['content-type'].startswith('text/event-stream')
        results = [
            v03.SendStreamingMessageSuccessResponse.model_validate(json.loads(data)).result
            for _, data in parse_sse(streamed.text)
        ]

    assert [e.kind for e in results][0] == 'task'
    last = results[-1]
    assert isinstance(last, v03.TaskStatusUpdateEvent), last
    assert last.final is True
    assert last.status.state == v03.TaskState.completed
    assert all(
        not r.final for r in results[:-1] if isinstance(r, v03.TaskStatusUpdateEvent)
    ), 'only the last status update is final'
    pieces = [
        p.root.text
        for r in results
        if isinstance(r, v03.TaskArtifactUpdateEvent)
        for p in r.artifact.parts
    ]
    assert ''.join(pieces) == 'xyz'
    assert all('a2a-version' not in e.request_headers for e in wire)
