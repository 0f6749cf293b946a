"""`volcanic a2a` (issue 24) against agents built on the official SDKs: the Python SDK
(servers/python_agent.py) and the JS SDK (js/agent.mjs), each serving JSON-RPC and HTTP+JSON at
1.0 and, through the SDK's compatibility layer, 0.3. Every test drives the real binary
(VOLCANIC_BIN) on every interface: blocking and streamed sends, input-required and its answer,
files both ways, get, cancel with a subscriber following the task, push config CRUD, ListTasks
(1.0), and the errors (TaskNotFound, a wrong key). Where an SDK falls short, the test asserts what
happens today and says why (the note in docs/a2a-client.md lists it).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import _binary
from test_js_v03_rest import JS_DIR, _install


KEY = 'k_sdk_agent_client_key_5d2f'
STARTUP_TIMEOUT = 30.0
RUN_TIMEOUT = 30.0
SERVERS = Path(__file__).resolve().parent / 'servers'
INTERFACES = [('jsonrpc', '1.0'), ('rest', '1.0'), ('jsonrpc', '0.3'), ('rest', '0.3')]


@dataclass
class Agent:
    kind: str
    base: str


def _start(command: list[str], cwd: Path, marker: str, log_name: str) -> Iterator[str]:
    # The test logs' folder under scripts/test (scanned for secrets), else the system's temp
    # folder: never the source tree.
    log_dir = os.environ.get('VOLCANIC_TEST_LOG_DIR') or tempfile.gettempdir()
    log = Path(log_dir) / log_name
    with log.open('w') as stderr:
        process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=stderr, text=True)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
        try:
            line = lines.get(timeout=STARTUP_TIMEOUT)
            assert line.startswith(marker), line
            yield line.removeprefix(marker).strip()
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.fixture(scope='module', params=['python', 'js'])
def agent(request: pytest.FixtureRequest) -> Iterator[Agent]:
    if request.param == 'python':
        command = [sys.executable, str(SERVERS / 'python_agent.py'), '--key', KEY]
        started = _start(command, SERVERS, 'python-agent: listening on ', 'client-python-agent.log')
    else:
        _install()
        started = _start(['node', 'agent.mjs', '--key', KEY], JS_DIR, 'js-agent: listening on ', 'client-js-agent.log')
    for base in started:
        yield Agent(request.param, base)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> list[dict]:
        return [json.loads(line) for line in self.stdout.splitlines()]


def a2a(cwd: Path, *args: str, key: str | None = KEY) -> Run:
    env = {'PATH': os.environ.get('PATH', ''), 'HOME': str(cwd)}
    if key is not None:
        env['VOLCANIC_A2A_KEY'] = key
    done = subprocess.run(
        [str(_binary()), 'a2a', *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert KEY not in done.stdout + done.stderr, 'the key was printed'
    return Run(done.returncode, done.stdout, done.stderr)


def task_of(run: Run) -> tuple[str, str]:
    line = next(line for line in run.stdout.splitlines() if ' · task ' in line)
    words = line.split()
    return words[words.index('task') + 1], words[words.index('context') + 1]


@pytest.mark.parametrize(('binding', 'version'), INTERFACES, ids=[f'{b}-{v}' for b, v in INTERFACES])
def test_client_against_sdk_agent(agent: Agent, binding: str, version: str, tmp_path: Path) -> None:
    url = agent.base
    flags = ('--binding', binding, '--a2a-version', version)

    def run(*args: str, key: str | None = KEY) -> Run:
        return a2a(tmp_path, *args, *flags, key=key)

    sent = run('send', url, 'hello')
    assert sent.code == 0, sent.stderr
    assert sent.stdout.startswith('completed · task ') and 'hello\n' in sent.stdout, sent.stdout
    answer = run('send', url, 'hello json', '--json').json()
    assert answer[0]['task']['status']['state'] == 'TASK_STATE_COMPLETED', answer

    streamed = run('send', url, 'stream', '--stream')
    assert streamed.code == 0, streamed.stderr
    assert '[working] thinking\none two three\n[completed]\n' in streamed.stdout, streamed.stdout
    events = run('send', url, 'stream', '--stream', '--json').json()
    assert 'task' in events[0] and events[-1]['statusUpdate']['status']['state'] == 'TASK_STATE_COMPLETED', events

    asked = run('send', url, 'ask')
    task, context = task_of(asked)
    assert asked.stdout.startswith(f'input-required · task {task}'), asked.stdout
    assert 'The agent asks: Which city?\n' in asked.stdout, asked.stdout
    answer = f'Answer with: volcanic a2a send {url} --task {task} --context {context} --binding {binding} --a2a-version {version}'
    assert f'{answer} "<your answer>"' in asked.stdout, asked.stdout
    answered = run('send', url, 'Paris', '--task', task)
    assert answered.code == 0, answered.stderr
    assert answered.stdout == f'completed · task {task} · context {context}\ngoing to Paris\n', answered.stdout
    got = run('get', url, task)
    assert got.stdout.startswith(f'completed · task {task}'), got.stdout

    (tmp_path / 'note.txt').write_bytes(b'bytes for the agent\n')
    files = run('send', url, 'files', '--file', 'note.txt', '--out', 'got')
    if files.code == 0:
        file_task, _ = task_of(files)
        saved = [path.read_bytes() for path in (tmp_path / 'got' / file_task).iterdir()]
    if (agent.kind, binding, version) == ('python', 'rest', '0.3'):
        # The Python SDK's 0.3 REST server base64-decodes `fileWithBytes` once more than the
        # proto says (its 0.3 REST client encodes once more to match; docs/a2a.md, "0.3 over
        # HTTP+JSON"): a file sent as the proto says fails there with a 500, or arrives mangled.
        assert files.code == 1 and 'HTTP 500' in files.stderr or saved != [b'bytes for the agent\n']
    else:
        assert files.code == 0, files.stderr
        assert saved == [b'bytes for the agent\n'], files.stdout

    started = run('send', url, 'slow', '--no-wait', '--json').json()
    slow = started[0]['task']['id']
    subscriber = subprocess.Popen(
        [str(_binary()), 'a2a', 'subscribe', url, slow, *flags],
        cwd=tmp_path,
        env={'PATH': os.environ.get('PATH', ''), 'VOLCANIC_A2A_KEY': KEY},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = subscriber.stdout.readline()
        assert f'task {slow}' in first, first
        hook = 'http://127.0.0.1:9/hook'
        created = run('push', 'set', url, slow, hook, '--id', 'hook-1', '--token', 'tok-0123456789')
        assert created.stdout == f'push config hook-1 · task {slow} → {hook} · token set\n', created.stdout + created.stderr
        got = run('push', 'get', url, slow, 'hook-1', '--json').json()
        assert (got[0]['id'], got[0]['url']) == ('hook-1', hook), got
        assert 'push config hook-1' in run('push', 'list', url, slow).stdout
        deleted = run('push', 'delete', url, slow, 'hook-1')
        if (agent.kind, binding, version) == ('python', 'rest', '0.3'):
            # The Python SDK's 0.3 REST adapter has no DELETE route for push configs.
            assert deleted.code == 1 and 'HTTP 404' in deleted.stderr, deleted.stderr
        else:
            assert deleted.code == 0, deleted.stderr
            assert run('push', 'list', url, slow).stdout == 'no push configs\n'
        canceled = run('cancel', url, slow)
        assert canceled.stdout.startswith(f'canceled · task {slow}'), canceled.stdout + canceled.stderr
        rest, errors = subscriber.communicate(timeout=RUN_TIMEOUT)
        assert subscriber.returncode == 1, rest + errors
        assert rest.endswith('[canceled]\n'), rest + errors
    finally:
        if subscriber.poll() is None:
            subscriber.kill()
            subscriber.communicate(timeout=RUN_TIMEOUT)

    missing = run('get', url, 'no-such-task')
    assert missing.code == 1 and 'the agent answered TaskNotFound' in missing.stderr, missing.stderr
    wrong = run('get', url, task, key='k_wrong_sdk_agent_key_77')
    assert wrong.code == 1 and 'the key was not accepted' in wrong.stderr, wrong.stderr

    listed = run('list', url, '--page-size', '2', '--json')
    if version == '0.3':
        assert listed.code == 1 and 'listing tasks does not exist in A2A 0.3' in listed.stderr
    else:
        page = listed.json()[0]
        assert len(page['tasks']) == 2 and page['nextPageToken'], page
        waiting = run('list', url, '--status', 'canceled')
        assert waiting.stdout.startswith(f'{slow} canceled'), waiting.stdout
