"""Resuming a stream with the SDK client (issue 21, item 3).

The SDK (a2a-sdk 1.3.0) does not expose SSE event ids, nor does it resume by itself; but it sends
whatever headers a call's `ClientCallContext.service_parameters` holds. So the test reads the id
of the last event the SDK consumed from the recorded wire, and resubscribes through the SDK with
`Last-Event-ID` in the call's service parameters: the SDK then sees exactly the missed events
and the live ones, and parses them as it parses any stream.
"""

from __future__ import annotations

import asyncio

from a2a.client.client import ClientCallContext
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import GetTaskRequest, SubscribeToTaskRequest, TaskState

from conftest import Connector
from support import STEP_TIMEOUT, assert_binding, collect, faux, response_text, send_request
from wire import Exchange


WORDS = ''.join(f'w{i:02} ' for i in range(30))


def sse_ids(exchange: Exchange) -> list[str]:
    """The `id:` of each complete SSE event in an exchange's body, in order."""
    ids = []
    for block in bytes(exchange.body).decode('utf-8').replace('\r\n', '\n').split('\n\n')[:-1]:
        lines = [line for line in block.split('\n') if line and not line.startswith(':')]
        if any(line.startswith('data:') for line in lines):
            found = [line.partition(':')[2].strip() for line in lines if line.startswith('id:')]
            ids.append(found[-1] if found else '')
    return ids


async def test_sdk_resubscribes_with_last_event_id_and_gets_exactly_what_it_missed(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    script = faux({'text': WORDS, 'chunk': 4, 'delay_ms': 150})
    # The task and four chunks, then the client goes away while the run goes on.
    async with connect(binding, streaming=True) as client:
        seen = []
        async with asyncio.timeout(STEP_TIMEOUT):
            stream = client.send_message(send_request(script))
            async for event in stream:
                seen.append(event)
                if len(seen) == 5:
                    break
            await stream.aclose()
    assert seen[0].HasField('task'), seen[0]
    task = seen[0].task
    for event in seen[1:]:
        assert event.HasField('artifact_update'), event
        append_artifact_to_task(task, event.artifact_update)
    got = response_text(task)
    assert got == WORDS[:16], got
    streamed = [x for x in wire if x.is_sse()]
    ids = sse_ids(streamed[-1])
    assert len(ids) >= 5 and all(ids), ids
    last_seen = ids[4]

    async with connect(binding, streaming=True) as client:
        async with asyncio.timeout(STEP_TIMEOUT):
            while True:
                now = await client.get_task(GetTaskRequest(id=task.id))
                if len(response_text(now)) >= len(got) + 8:
                    break
                await asyncio.sleep(0.02)
        assert now.status.state == TaskState.TASK_STATE_WORKING, 'the run must still be going'
        context = ClientCallContext(service_parameters={'Last-Event-ID': last_seen})
        resumed = await collect(client.subscribe(SubscribeToTaskRequest(id=task.id), context=context))

    assert resumed and not any(event.HasField('task') for event in resumed), resumed
    for event in resumed[:-1]:
        assert event.HasField('artifact_update'), event
        append_artifact_to_task(task, event.artifact_update)
    assert resumed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert response_text(task) == WORDS, 'every chunk exactly once'
    # The resumed stream's ids follow the last one the client had, one by one.
    run, seq = (int(part) for part in last_seen.split('.'))
    resumed_ids = sse_ids([x for x in wire if x.is_sse()][-1])
    assert resumed_ids == [f'{run}.{seq + 1 + i}' for i in range(len(resumed))], resumed_ids
    assert_binding(wire, binding)
