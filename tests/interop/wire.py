"""Records every HTTP exchange of a test and checks each answer against the SDK's own types.

The a2a-sdk 1.x client parses 1.0 results leniently (``ignore_unknown_fields=True``), so a stray
field would pass through it unnoticed, while other clients (and older SDK releases) reject it.
The recorder therefore re-parses every 1.0 answer *strictly* with the SDK's protobuf types
(``json_format.ParseDict`` without ``ignore_unknown_fields``), every error's details as
``google.protobuf.Any`` (ErrorInfo), and every 0.3 answer with the SDK's 0.3 pydantic models.
The shape check is the SDK's, not ours.
"""

from __future__ import annotations

import json

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import a2a_v0_3_pb2 as v03_proto
from a2a.compat.v0_3 import types as v03
from a2a.types.a2a_pb2 import (
    AgentCard,
    ListTasksResponse,
    SendMessageResponse,
    StreamResponse,
    Task,
)
from google.protobuf import any_pb2, json_format
from google.rpc import error_details_pb2  # noqa: F401  (registers ErrorInfo for Any)


JSONRPC_PATH = '/a2a'
REST_PREFIX = '/a2a/v1'
CARD_PATH = '/.well-known/agent-card.json'

# 1.0 JSON-RPC methods and the proto type of their `result`.
RPC_RESULTS: dict[str, type] = {
    'SendMessage': SendMessageResponse,
    'SendStreamingMessage': StreamResponse,
    'SubscribeToTask': StreamResponse,
    'GetTask': Task,
    'ListTasks': ListTasksResponse,
    'CancelTask': Task,
    'GetExtendedAgentCard': AgentCard,
}

# 0.3 JSON-RPC methods and the SDK's 0.3 model of their success response.
V03_RESULTS: dict[str, type] = {
    'message/send': v03.SendMessageSuccessResponse,
    'message/stream': v03.SendStreamingMessageSuccessResponse,
    'tasks/resubscribe': v03.SendStreamingMessageSuccessResponse,
    'tasks/get': v03.GetTaskSuccessResponse,
    'tasks/cancel': v03.CancelTaskSuccessResponse,
}


@dataclass
class Exchange:
    """One request and its answer, body included (streams are teed as they are read)."""

    method: str
    url: httpx.URL
    request_headers: httpx.Headers
    request_body: bytes
    status: int = 0
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    body: bytearray = field(default_factory=bytearray)
    complete: bool = False

    @property
    def path(self) -> str:
        return self.url.path

    def rpc_method(self) -> str | None:
        if self.path.rstrip('/') != JSONRPC_PATH or not self.request_body:
            return None
        try:
            return json.loads(self.request_body).get('method')
        except (ValueError, AttributeError):
            return None

    def is_sse(self) -> bool:
        return 'text/event-stream' in self.headers.get('content-type', '')

    def sse_events(self) -> list[tuple[str, str]]:
        """(event name, data) of each complete SSE event in the body."""
        return parse_sse(self.body.decode('utf-8'), complete=self.complete)

    def json(self) -> Any:
        return json.loads(bytes(self.body))

    def describe(self) -> str:
        body = bytes(self.body).decode('utf-8', 'replace')
        return (
            f'{self.method} {self.url} -> {self.status}\n'
            f'request: {self.request_body.decode("utf-8", "replace")[:2000]}\n'
            f'response: {body[:4000]}'
        )


def parse_sse(text: str, *, complete: bool = True) -> list[tuple[str, str]]:
    """(event name, data) of each SSE event; a complete stream must end on an event boundary."""
    blocks = text.replace('\r\n', '\n').split('\n\n')
    tail = blocks.pop()  # '' when the body ends on an event boundary
    if tail.strip() and complete:
        raise AssertionError(f'unterminated SSE event at the end of the stream: {tail!r}')
    events = []
    for block in blocks:
        name, data = 'message', []
        for line in block.split('\n'):
            if not line or line.startswith(':'):
                continue
            key, _, value = line.partition(':')
            value = value.removeprefix(' ')
            if key == 'event':
                name = value
            elif key == 'data':
                data.append(value)
        if data:
            events.append((name, '\n'.join(data)))
    return events


class _TeeStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, exchange: Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._exchange.body.extend(chunk)
            yield chunk
        self._exchange.complete = True

    async def aclose(self) -> None:
        await self._inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """An httpx transport that keeps a copy of every exchange in `exchanges`."""

    def __init__(self, exchanges: list[Exchange]) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._exchanges = exchanges

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = Exchange(
            method=request.method,
            url=request.url,
            request_headers=request.headers,
            request_body=request.content,
        )
        self._exchanges.append(exchange)
        response = await self._inner.handle_async_request(request)
        exchange.status = response.status_code
        exchange.headers = response.headers
        response.stream = _TeeStream(response.stream, exchange)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


# --- strict checks -------------------------------------------------------------------------------


GENERATIONS_EXTENSION = (
    'https://github.com/a2aproject/A2A/blob/28491879ff41a9c230fb51f3f7bd6096b80cc341/'
    'docs/specification.md#327-task-generation-semantics'
)
"""The task-generation extension (docs/a2a.md, "Task generations"): its `generation` members are
the only thing a call that activates it may get beyond the 1.0 types."""

_generations_active = False


def _without_generations(payload: Any) -> Any:
    """`payload` less the `generation` member of its task objects and events (each checked to be a
    decimal string, as ProtoJSON writes int64)."""
    if isinstance(payload, dict):
        out = {}
        for key, value in payload.items():
            if key == 'generation':
                assert isinstance(value, str) and value.isdigit() and int(value) >= 1, (
                    f'generation must be a decimal string >= 1: {value!r}'
                )
                continue
            out[key] = _without_generations(value)
        return out
    if isinstance(payload, list):
        return [_without_generations(value) for value in payload]
    return payload


def strict(payload: Any, proto_type: type) -> Any:
    """Parses ProtoJSON exactly as a strict 1.0 client would: unknown keys are errors (for a call
    that activated task generations, all but their `generation` members)."""
    if _generations_active:
        payload = _without_generations(payload)
    return json_format.ParseDict(payload, proto_type(), ignore_unknown_fields=False)


def _check_details(details: Any, where: str) -> None:
    assert isinstance(details, list), f'{where} must be a list: {details!r}'
    for detail in details:
        strict(detail, any_pb2.Any)


def _check_rpc_error(error: Any) -> None:
    assert isinstance(error, dict), f'JSON-RPC error is not an object: {error!r}'
    assert set(error) <= {'code', 'message', 'data'}, f'unknown keys in a JSON-RPC error: {error}'
    assert isinstance(error.get('code'), int), f'error.code: {error!r}'
    assert isinstance(error.get('message'), str), f'error.message: {error!r}'
    if 'data' in error:
        _check_details(error['data'], 'error.data')


def _check_rest_error(payload: Any, http_status: int) -> None:
    assert isinstance(payload, dict) and set(payload) == {'error'}, f'REST error: {payload!r}'
    error = payload['error']
    assert set(error) <= {'code', 'status', 'message', 'details'}, f'REST error keys: {error}'
    assert error.get('code') == http_status, f'error.code {error.get("code")} != HTTP {http_status}'
    assert isinstance(error.get('status'), str) and error['status'], f'error.status: {error!r}'
    assert isinstance(error.get('message'), str), f'error.message: {error!r}'
    if 'details' in error:
        _check_details(error['details'], 'error.details')


def _check_rpc_envelope(envelope: Any, method: str) -> None:
    assert isinstance(envelope, dict), f'not a JSON-RPC response: {envelope!r}'
    assert envelope.get('jsonrpc') == '2.0', f'jsonrpc: {envelope!r}'
    assert 'id' in envelope, f'no id: {envelope!r}'
    if 'error' in envelope:
        assert 'result' not in envelope, f'both result and error: {envelope!r}'
        _check_rpc_error(envelope['error'])
        if method in V03_RESULTS:
            v03.JSONRPCErrorResponse.model_validate(envelope)
        return
    assert set(envelope) == {'jsonrpc', 'id', 'result'}, f'envelope keys: {envelope!r}'
    if method in RPC_RESULTS:
        strict(envelope['result'], RPC_RESULTS[method])
    elif method in V03_RESULTS:
        V03_RESULTS[method].model_validate(envelope)


def _check_jsonrpc(exchange: Exchange, method: str) -> None:
    if exchange.status == 401:
        assert 'www-authenticate' in exchange.headers, '401 without WWW-Authenticate'
        return
    assert exchange.status == 200, f'JSON-RPC answered HTTP {exchange.status}'
    if exchange.is_sse():
        for _, data in exchange.sse_events():
            _check_rpc_envelope(json.loads(data), method)
    elif exchange.complete:
        assert exchange.headers.get('content-type', '').startswith('application/json')
        _check_rpc_envelope(exchange.json(), method)


def _rest_result(method: str, relative: str) -> type | None:
    if relative == '/message:send':
        return SendMessageResponse
    if relative == '/message:stream' or relative.endswith(':subscribe'):
        return StreamResponse
    if relative.endswith(':cancel'):
        return Task
    if relative == '/tasks':
        return ListTasksResponse
    if relative.startswith('/tasks/') and method == 'GET' and '/' not in relative[7:]:
        return Task
    if relative == '/extendedAgentCard':
        return AgentCard
    return None


def is_v03_rest(exchange: Exchange) -> bool:
    """Whether the server reads a REST call as 0.3 (docs/a2a.md): `A2A-Version: 0.3`; without a
    version, `GET /v1/card` or a body in a 0.3-only shape."""
    version = exchange.request_headers.get('a2a-version', '').strip()
    if version:
        return version.startswith('0.3')
    if exchange.path == REST_PREFIX + '/card':
        return True
    try:
        body = json.loads(exchange.request_body) if exchange.request_body.strip() else {}
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    message = body.get('message')
    config = body.get('config')
    return (
        'request' in body
        or (isinstance(message, dict) and 'content' in message and 'parts' not in message)
        or 'name' in body
        or 'parent' in body
        or (isinstance(config, dict) and ('pushNotificationConfig' in config or 'push_notification_config' in config))
    )


def _rest_result_v03(method: str, relative: str) -> type | None:
    """The 0.3 proto type of a 0.3 REST answer (PROTOCOL.md §10.6)."""
    if relative == '/message:send':
        return v03_proto.SendMessageResponse
    if relative == '/message:stream' or relative.endswith(':subscribe'):
        return v03_proto.StreamResponse
    if relative.endswith(':cancel'):
        return v03_proto.Task
    if relative == '/card':
        return v03_proto.AgentCard
    if relative.endswith('/pushNotificationConfigs') and method == 'GET':
        return v03_proto.ListTaskPushNotificationConfigResponse
    if '/pushNotificationConfigs' in relative and method in ('GET', 'POST'):
        return v03_proto.TaskPushNotificationConfig
    if relative.startswith('/tasks/') and method == 'GET' and '/' not in relative[7:]:
        return v03_proto.Task
    return None


def _check_rest_error_v03(payload: Any, http_status: int) -> None:
    """The 1.0 google.rpc.Status plus what the SDKs' 0.3 REST clients read: `code` (JSON-RPC),
    `message` and, where the SDK has a class for it, `type`."""
    assert isinstance(payload, dict), f'0.3 REST error: {payload!r}'
    assert set(payload) <= {'error', 'code', 'message', 'type'}, f'0.3 REST error keys: {payload}'
    _check_rest_error({'error': payload['error']}, http_status)
    assert isinstance(payload.get('code'), int) and isinstance(payload.get('message'), str), payload


def _check_rest(exchange: Exchange) -> None:
    relative = exchange.path[len(REST_PREFIX) :]
    v03_call = is_v03_rest(exchange)
    check_error = _check_rest_error_v03 if v03_call else _check_rest_error
    stream_type = v03_proto.StreamResponse if v03_call else StreamResponse
    if exchange.status == 401:
        assert 'www-authenticate' in exchange.headers, '401 without WWW-Authenticate'
        if exchange.complete:
            _check_rest_error(exchange.json(), exchange.status)
        return
    if exchange.status != 200:
        if exchange.complete:
            check_error(exchange.json(), exchange.status)
        return
    result = _rest_result_v03(exchange.method, relative) if v03_call else _rest_result(exchange.method, relative)
    if exchange.is_sse():
        for name, data in exchange.sse_events():
            if name == 'error':
                payload = json.loads(data)
                check_error(payload, payload['error'].get('code'))
            else:
                strict(json.loads(data), stream_type)
    elif exchange.complete and result is not None:
        assert exchange.headers.get('content-type', '').startswith('application/json')
        strict(exchange.json(), result)


def _check_card(exchange: Exchange) -> None:
    if exchange.status != 200 or not exchange.complete:
        return
    data = exchange.json()
    if exchange.request_headers.get('a2a-version', '').startswith('1.'):
        # Asked for 1.0: the strict 1.0 card, nothing a strict 1.0 parser would refuse.
        strict(data, AgentCard)
        return
    # Otherwise the blended 1.0 + 0.3 card: both views must parse with the SDK.
    parse_agent_card(json.loads(json.dumps(data)))
    v03.AgentCard.model_validate(data)


def check(exchange: Exchange) -> None:
    """Raises AssertionError (or a parse error) if the answer is not what the SDK's types allow."""
    global _generations_active
    asked = exchange.request_headers.get_list('a2a-extensions', split_commas=True)
    _generations_active = GENERATIONS_EXTENSION in [value.strip() for value in asked]
    try:
        _check(exchange)
    finally:
        _generations_active = False


def _check(exchange: Exchange) -> None:
    if exchange.path == CARD_PATH:
        _check_card(exchange)
    elif (method := exchange.rpc_method()) is not None:
        _check_jsonrpc(exchange, method)
    elif exchange.path.startswith(REST_PREFIX + '/'):
        _check_rest(exchange)


def check_all(exchanges: list[Exchange]) -> list[str]:
    """The problems found, one text per bad exchange (request and response included)."""
    problems = []
    for exchange in exchanges:
        try:
            check(exchange)
        except Exception as e:  # noqa: BLE001  (report every kind of parse failure)
            problems.append(f'{type(e).__name__}: {e}\n{exchange.describe()}')
    return problems
