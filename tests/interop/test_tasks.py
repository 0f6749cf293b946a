"""GetTask, ListTasks, CancelTask, SubscribeToTask and their errors through the SDK client."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from conftest import OTHER_KEY, Connector
from support import (
    STEP_TIMEOUT,
    TERMINAL,
    assert_binding,
    collect,
    faux,
    response_text,
    send,
    send_request,
    state_name,
)
from wire import Exchange


async def test_get_task_with_history_length(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    word = f'remember-{uuid.uuid4().hex[:8]}'
    async with connect(binding, streaming=False) as client:
        sent = await send(client, send_request(word))
        async with asyncio.timeout(STEP_TIMEOUT):
            full = await client.get_task(GetTaskRequest(id=sent.id))
            last = await client.get_task(GetTaskRequest(id=sent.id, history_length=1))
            none = await client.get_task(GetTaskRequest(id=sent.id, history_length=0))

    for task in (full, last, none):
        assert task.id == sent.id
        assert task.context_id == sent.context_id
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert response_text(task) == response_text(sent)

    assert len(full.history) >= 1
    user_turns = [m for m in full.history if m.role == Role.ROLE_USER]
    assert user_turns and word in user_turns[0].parts[0].text
    assert len(last.history) == 1
    assert last.history[0] == full.history[-1]
    assert len(none.history) == 0
    assert_binding(wire, binding)


async def test_list_tasks_only_ours_newest_first(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    context = f'ctx-{uuid.uuid4().hex}'
    async with connect(binding, key=OTHER_KEY, streaming=False) as other:
        theirs = await send(other, send_request('not yours', context_id=context))
        async with asyncio.timeout(STEP_TIMEOUT):
            their_list = await other.list_tasks(ListTasksRequest(page_size=100))

    async with connect(binding, streaming=False) as client:
        first = await send(client, send_request('first', context_id=context))
        second = await send(client, send_request('second', context_id=context))
        assert first.context_id == second.context_id == context
        async with asyncio.timeout(STEP_TIMEOUT):
            in_context = await client.list_tasks(ListTasksRequest(context_id=context))
            everything = await client.list_tasks(ListTasksRequest(page_size=100))

    # The same contextId from another caller is another caller's conversation: not listed.
    assert [t.id for t in in_context.tasks] == [second.id, first.id]
    assert in_context.total_size == 2
    assert in_context.next_page_token == ''
    assert all(not t.artifacts for t in in_context.tasks), 'artifacts only with includeArtifacts'

    ids = [t.id for t in everything.tasks]
    assert theirs.id not in ids
    assert ids.index(second.id) < ids.index(first.id)
    stamps = [t.status.timestamp.ToNanoseconds() for t in everything.tasks]
    assert stamps == sorted(stamps, reverse=True), 'newest first by status timestamp'
    assert theirs.id in [t.id for t in their_list.tasks]
    assert first.id not in [t.id for t in their_list.tasks]
    assert_binding(wire, binding)


async def test_cancel_sleeping_task(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    async with connect(binding, streaming=False) as client:
        started = await send(
            client, send_request(faux({'sleep_ms': 10000}), return_immediately=True)
        )
        assert started.status.state not in TERMINAL, state_name(started.status.state)
        async with asyncio.timeout(STEP_TIMEOUT):
            canceled = await client.cancel_task(CancelTaskRequest(id=started.id))
            assert canceled.id == started.id
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED, state_name(
                canceled.status.state
            )
            fetched = await client.get_task(GetTaskRequest(id=started.id))
            assert fetched.status.state == TaskState.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=started.id))
    assert_binding(wire, binding)


async def test_subscribe_to_live_task_gets_final_state(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    script = faux({'sleep_ms': 2000}, {'text': 'woke up', 'chunk': 4})
    async with connect(binding, streaming=False) as starter:
        started = await send(starter, send_request(script, return_immediately=True))
    assert started.status.state not in TERMINAL, state_name(started.status.state)

    async with connect(binding, streaming=True) as client:
        events = await collect(client.subscribe(SubscribeToTaskRequest(id=started.id)))
        async with asyncio.timeout(STEP_TIMEOUT):
            final = await client.get_task(GetTaskRequest(id=started.id))

    assert events[0].HasField('task'), 'SubscribeToTask sends the current task first'
    snapshot = events[0].task
    assert snapshot.id == started.id
    assert snapshot.status.state not in TERMINAL, state_name(snapshot.status.state)
    assert events[-1].HasField('status_update')
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    for event in events[1:]:
        if event.HasField('artifact_update'):
            append_artifact_to_task(snapshot, event.artifact_update)
    assert response_text(snapshot) == 'woke up'
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert response_text(final) == 'woke up'
    assert_binding(wire, binding)


async def test_unknown_task_id_is_task_not_found(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    missing = f'no-such-task-{uuid.uuid4()}'
    async with connect(binding, streaming=True) as client:
        async with asyncio.timeout(STEP_TIMEOUT):
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=missing))
            with pytest.raises(TaskNotFoundError):
                await client.cancel_task(CancelTaskRequest(id=missing))
        with pytest.raises(TaskNotFoundError):
            await collect(client.subscribe(SubscribeToTaskRequest(id=missing)))
    assert_binding(wire, binding)


async def test_subscribe_to_completed_task_is_unsupported(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    """A settled task cannot be subscribed to: the SDK raises the error, it sees no stream."""
    async with connect(binding, streaming=False) as client:
        done = await send(client, send_request('finish first'))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    async with connect(binding, streaming=True) as client:
        async with asyncio.timeout(STEP_TIMEOUT):
            with pytest.raises(UnsupportedOperationError):
                await collect(client.subscribe(SubscribeToTaskRequest(id=done.id)))
    # The refusal is a plain answer, not a stream that holds it.
    answers = [x for x in wire if x.rpc_method() == 'SubscribeToTask' or ':subscribe' in x.path]
    assert answers, 'the subscription went over the wire'
    assert not answers[-1].is_sse(), answers[-1].headers
    assert_binding(wire, binding)


async def test_other_callers_task_is_task_not_found(
    connect: Connector, binding: str, wire: list[Exchange]
) -> None:
    async with connect(binding, streaming=False) as client:
        ours = await send(client, send_request('mine'))
    async with connect(binding, key=OTHER_KEY, streaming=False) as other:
        async with asyncio.timeout(STEP_TIMEOUT):
            with pytest.raises(TaskNotFoundError):
                await other.get_task(GetTaskRequest(id=ours.id))
