"""Task generations with the SDK client (issue 21, item 4).

The SDK (a2a-sdk 1.3.0) knows nothing of the A2A 1.1 draft's `generation`, but it sends whatever
headers a call's `ClientCallContext.service_parameters` holds and parses answers leniently. So an
SDK client can activate the extension with `A2A-Extensions` and go on working; the recorded wire
shows the generations, and every answer still parses strictly with the SDK's 1.0 types once
exactly those `generation` members are taken out (wire.py). Without the header nothing changes
(every other interop test, parsed strictly as it is).
"""

from __future__ import annotations

import asyncio
import json

from a2a.client.client import ClientCallContext
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from conftest import Connector
from support import STEP_TIMEOUT, assert_binding, collect, faux, send_request
from wire import GENERATIONS_EXTENSION, Exchange


def inner(data: str) -> dict:
    """The task or event inside one SSE event's data (JSON-RPC result, or the REST body)."""
    payload = json.loads(data)
    payload = payload.get('result', payload)
    for kind in ('task', 'statusUpdate', 'artifactUpdate'):
        if kind in payload:
            return payload[kind]
    raise AssertionError(f'not a task event: {payload}')


async def test_sdk_client_activating_generations_reads_every_answer(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    context = ClientCallContext(service_parameters={'A2A-Extensions': GENERATIONS_EXTENSION})
    script = faux({'text': 'Let me see.'}, {'tool': 'ls', 'args': {}}, {'text': 'abcdefgh', 'chunk': 2})
    async with connect(binding, streaming=True) as client:
        async with asyncio.timeout(STEP_TIMEOUT):
            events = await collect(client.send_message(send_request(script), context=context))
            task_id = events[0].task.id
            got = await client.get_task(GetTaskRequest(id=task_id), context=context)
    assert got.status.state == TaskState.TASK_STATE_COMPLETED, got

    streamed = [x for x in wire if x.is_sse()][-1]
    assert streamed.headers.get('a2a-extensions') == GENERATIONS_EXTENSION
    generations = [int(inner(data)['generation']) for _, data in streamed.sse_events()]
    assert generations == list(range(1, len(generations) + 1)), generations
    assert len(generations) == len(events), 'the SDK saw every event the wire carried'

    read = [x for x in wire if not x.is_sse() and x.complete and 'generation' in bytes(x.body).decode()][-1]
    body = read.json()
    task = body.get('result', body)
    assert int(task['generation']) == generations[-1], task
    assert_binding(wire, binding)
