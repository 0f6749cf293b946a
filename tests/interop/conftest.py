"""Interop fixtures: one `volcanic serve --faux` per test session, and SDK clients for it.

The binary comes from VOLCANIC_BIN (default: target/debug/volcanic under the repo root); the
suite builds nothing. scripts/test builds it and runs this suite after the Rust tests.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from a2a.client import (
    A2ACardResolver,
    AuthInterceptor,
    Client,
    ClientConfig,
    ClientFactory,
    CredentialService,
    create_client,
)
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import AgentCard

from wire import Exchange, RecordingTransport, check_all


REPO_ROOT = Path(__file__).resolve().parents[2]
KEY = 'k_py_bot_interop_5c1e'
OTHER_KEY = 'k_other_bot_interop_9a7d'
# A caller whose every task waits for the owner's approval (test_approvals.py).
APPROVAL_KEY = 'k_careful_bot_interop_3b8f'
STARTUP_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 15.0
HTTP_TIMEOUT = 20.0
LISTENING = 'volcanic: listening on '

BINDINGS = ['JSONRPC', 'HTTP+JSON']
BINDING_IDS = {'JSONRPC': 'jsonrpc', 'HTTP+JSON': 'rest'}


@dataclass
class Served:
    base: str
    workspace: Path
    process: subprocess.Popen[str]
    log: Path
    state: Path


def _binary() -> Path:
    configured = os.environ.get('VOLCANIC_BIN', 'target/debug/volcanic')
    path = Path(configured)
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.is_file():
        pytest.exit(f'volcanic binary not found at {path}: build it or set VOLCANIC_BIN', 2)
    return path


def _stop(served: Served) -> int | None:
    """SIGTERM, then wait (bounded); kill on timeout. Returns the exit code, None if killed."""
    if served.process.poll() is not None:
        return served.process.returncode
    served.process.send_signal(signal.SIGTERM)
    try:
        return served.process.wait(timeout=SHUTDOWN_TIMEOUT)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait(timeout=SHUTDOWN_TIMEOUT)
        return None


@pytest.fixture(scope='session')
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp('volcanic')
    workspace, state, home = root / 'workspace', root / 'state', root / 'home'
    for folder in (workspace / '.volcanic' / 'a2a', state, home):
        folder.mkdir(parents=True)
    (workspace / '.volcanic' / 'a2a' / 'callers.json').write_text(
        json.dumps([
            {'name': 'py-bot', 'key': KEY},
            {'name': 'other-bot', 'key': OTHER_KEY},
            {'name': 'careful-bot', 'key': APPROVAL_KEY, 'approval': 'every-task'},
        ])
    )
    # scripts/test scans the server log for leaked keys (docs/reliability.md, "Secrets in logs").
    log_dir = os.environ.get('VOLCANIC_TEST_LOG_DIR')
    log = Path(log_dir) / 'interop-serve.log' if log_dir else root / 'serve.log'
    with log.open('w') as stderr:
        process = subprocess.Popen(
            [
                str(_binary()),
                'serve',
                '--faux',
                '--listen',
                '127.0.0.1:0',
                '--workspace',
                str(workspace),
                '--state-dir',
                str(state),
            ],
            # Webhooks of the push tests listen on 127.0.0.1.
            env={
                'PATH': os.environ.get('PATH', ''),
                'HOME': str(home),
                'A2A__AllowPrivatePushUrls': 'true',
                'RUST_LOG': 'debug',
            },
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        # Reads stdout to its end so the server never blocks on a full pipe.
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip('\n'))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    served = Served(base='', workspace=workspace, process=process, log=log, state=state)
    try:
        line = lines.get(timeout=STARTUP_TIMEOUT)
    except queue.Empty:
        _stop(served)
        pytest.fail(f'no listening line within {STARTUP_TIMEOUT}s; log:\n{log.read_text()}')
    if line is None or not line.startswith(LISTENING):
        _stop(served)
        pytest.fail(f'unexpected first stdout line {line!r}; log:\n{log.read_text()}')
    served.base = line.removeprefix(LISTENING)
    assert served.base.startswith('http://127.0.0.1:'), served.base

    yield served

    code = _stop(served)
    tail = log.read_text()[-4000:]
    assert code is not None, f'volcanic serve ignored SIGTERM for {SHUTDOWN_TIMEOUT}s; log:\n{tail}'
    assert code == 0, f'volcanic serve exited {code} after SIGTERM; log:\n{tail}'
    assert KEY not in log.read_text(), 'a caller key reached the server log'


@pytest.fixture
def wire() -> Iterator[list[Exchange]]:
    """Every HTTP exchange of the test; each answer is checked strictly at the end of the test."""
    exchanges: list[Exchange] = []
    yield exchanges
    problems = check_all(exchanges)
    assert not problems, 'the server answered outside the SDK types:\n\n' + '\n\n'.join(problems)


class StaticCredentials(CredentialService):
    """The caller key for the card's security schemes (all of them, or only `scheme`)."""

    def __init__(self, key: str, scheme: str | None = None) -> None:
        self._key = key
        self._scheme = scheme

    async def get_credentials(self, security_scheme_name, context):  # noqa: ANN001, ANN201
        if self._scheme is None or security_scheme_name == self._scheme:
            return self._key
        return None


@dataclass
class Connector:
    server: Served
    exchanges: list[Exchange]

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=RecordingTransport(self.exchanges), timeout=HTTP_TIMEOUT
        )

    @asynccontextmanager
    async def __call__(
        self,
        binding: str,
        *,
        key: str = KEY,
        streaming: bool = True,
        scheme: str | None = None,
    ) -> AsyncIterator[Client]:
        """An SDK client from the served card, restricted to one protocol binding.

        The key is attached by the SDK's AuthInterceptor from the card's security schemes
        (apiKey → X-API-Key, bearer → Authorization: Bearer).
        """
        async with self.http() as http:
            config = ClientConfig(
                streaming=streaming,
                httpx_client=http,
                supported_protocol_bindings=[binding],
            )
            client = await create_client(
                self.server.base,
                client_config=config,
                interceptors=[AuthInterceptor(StaticCredentials(key, scheme))],
            )
            try:
                yield client
            finally:
                await client.close()

    @asynccontextmanager
    async def v03(self, *, streaming: bool = True, binding: str = 'JSONRPC') -> AsyncIterator[Client]:
        """An SDK client as a 0.3 agent would see us: the card read without its 1.0 interfaces.

        The SDK maps the card's 0.3 fields (url, preferredTransport, additionalInterfaces,
        protocolVersion) to 0.3 interfaces, and ClientFactory then picks its 0.3 compat transport
        for `binding`: JSON-RPC, or HTTP+JSON (CompatRestTransport, at the card's `/a2a`).
        """
        async with self.http() as http:
            response = await http.get(self.server.base + '/.well-known/agent-card.json')
            response.raise_for_status()
            data = response.json()
            data.pop('supportedInterfaces')
            card = parse_agent_card(data)
            config = ClientConfig(
                streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
            )
            client = ClientFactory(config).create(
                card, interceptors=[AuthInterceptor(StaticCredentials(KEY))]
            )
            try:
                yield client
            finally:
                await client.close()

    async def card(self) -> AgentCard:
        async with self.http() as http:
            return await A2ACardResolver(http, self.server.base).get_agent_card()


@pytest.fixture
def connect(server: Served, wire: list[Exchange]) -> Connector:
    return Connector(server, wire)


@pytest.fixture(params=BINDINGS, ids=lambda b: BINDING_IDS[b])
def binding(request: pytest.FixtureRequest) -> str:
    return request.param

