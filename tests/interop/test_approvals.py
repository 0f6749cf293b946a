"""Owner approval with the SDK client (issue 22): a caller whose tasks wait for the owner gets
them in TASK_STATE_AUTH_REQUIRED, a stream that ends there, and, once the owner approves
(through the server's control socket, as `volcanic approve` does), the task's run, which the SDK
follows with GetTask and SubscribeToTask. Every answer also parses strictly (wire.py).
"""

from __future__ import annotations

import asyncio
import json
import socket

from a2a.types.a2a_pb2 import GetTaskRequest, SubscribeToTaskRequest, TaskState

from conftest import APPROVAL_KEY, Connector, Served
from support import STEP_TIMEOUT, assert_binding, collect, faux, response_text, send_request
from wire import Exchange


def control(served: Served, request: dict) -> dict:
    """One request to the server's control socket (what `volcanic approvals|approve|deny` send)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(STEP_TIMEOUT)
        s.connect(str(served.state / 'a2a' / 'control.sock'))
        s.sendall((json.dumps(request) + '\n').encode())
        answer = b''
        while not answer.endswith(b'\n'):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    return json.loads(answer)


def state_of(event) -> int:  # noqa: ANN001
    if event.HasField('task'):
        return event.task.status.state
    return event.status_update.status.state


async def test_sdk_follows_a_task_through_the_owners_approval(
    connect: Connector, binding: str, wire: list[Exchange], server: Served
) -> None:
    script = faux({'text': 'approved and done'})
    async with connect(binding, key=APPROVAL_KEY, streaming=True) as client:
        async with asyncio.timeout(STEP_TIMEOUT):
            events = await collect(client.send_message(send_request(script)))
        assert state_of(events[-1]) == TaskState.TASK_STATE_AUTH_REQUIRED, events
        task_id = events[0].task.id

        waiting = control(server, {'op': 'list'})
        mine = [a for a in waiting['approvals'] if a['taskId'] == task_id]
        assert len(mine) == 1, waiting
        assert mine[0]['caller'] == 'careful-bot'

        # A subscription before the decision: the task, in the state it waits in, then the end.
        async with asyncio.timeout(STEP_TIMEOUT):
            before = await collect(client.subscribe(SubscribeToTaskRequest(id=task_id)))
        assert state_of(before[-1]) == TaskState.TASK_STATE_AUTH_REQUIRED, before

        decided = control(server, {'op': 'approve', 'id': mine[0]['id']})
        assert decided['ok'] is True, decided

        async with asyncio.timeout(STEP_TIMEOUT):
            while True:
                task = await client.get_task(GetTaskRequest(id=task_id))
                if task.status.state == TaskState.TASK_STATE_COMPLETED:
                    break
                await asyncio.sleep(0.02)
    assert 'approved and done' in response_text(task), task
    assert_binding(wire, binding)


async def test_sdk_sees_a_denied_task_rejected_with_the_reason(
    connect: Connector, wire: list[Exchange], server: Served
) -> None:
    async with connect('JSONRPC', key=APPROVAL_KEY, streaming=False) as client:
        async with asyncio.timeout(STEP_TIMEOUT):
            events = await collect(client.send_message(send_request('please delete everything')))
        task = events[-1].task
        assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED, task
        request = [a for a in control(server, {'op': 'list'})['approvals'] if a['taskId'] == task.id]
        decided = control(server, {'op': 'deny', 'id': request[0]['id'], 'reason': 'not today'})
        assert decided['ok'] is True, decided
        async with asyncio.timeout(STEP_TIMEOUT):
            task = await client.get_task(GetTaskRequest(id=task.id))
    assert task.status.state == TaskState.TASK_STATE_REJECTED, task
    assert 'not today' in task.status.message.parts[0].text
