"""A2A 0.3 over HTTP+JSON through the official JavaScript SDK (@a2a-js/sdk, pinned in
tests/interop/js/package-lock.json): its LegacyRestTransport, picked by its ClientFactory from the
card's 0.3 fields, and the same transport used on its own (no A2A-Version header).

The SDK is installed here with `npm ci` when tests/interop/js/node_modules is missing or older than
the lock file, as bench/run installs bench/js; Node 20 or later must be on PATH.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

from pathlib import Path

import pytest

from conftest import KEY, Served


JS_DIR = Path(__file__).resolve().parent / 'js'
NPM_TIMEOUT = 300.0
RUN_TIMEOUT = 60.0


def _install() -> None:
    """`npm ci` once per change of the lock file (the stamp holds the hash of the last install)."""
    stamp = JS_DIR / '.installed-lock.sha256'
    wanted = hashlib.sha256((JS_DIR / 'package-lock.json').read_bytes()).hexdigest()
    if (JS_DIR / 'node_modules').is_dir() and stamp.is_file() and stamp.read_text() == wanted:
        return
    npm = shutil.which('npm')
    if npm is None:
        pytest.fail('npm is not on PATH: the JS SDK interop test needs Node 20+ and npm')
    subprocess.run(
        [npm, 'ci', '--no-audit', '--no-fund', '--loglevel=error'],
        cwd=JS_DIR,
        check=True,
        timeout=NPM_TIMEOUT,
    )
    stamp.write_text(wanted)


def test_js_sdk_v03_rest_client(server: Served) -> None:
    _install()
    run = subprocess.run(
        ['node', 'v03_rest.mjs', server.base, KEY],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert run.returncode == 0, f'stdout:\n{run.stdout}\nstderr:\n{run.stderr}'
    seen = json.loads(run.stdout.strip().splitlines()[-1])

    # The factory chose the SDK's 0.3 REST transport from the card's 0.3 HTTP+JSON interface.
    assert (seen['transport'], seen['protocolVersion']) == ('_LegacyRestTransport', '0.3'), seen
    assert seen['send']['state'] == 'TASK_STATE_COMPLETED'
    assert seen['send']['answer'].startswith('echo: ') and seen['send']['answer'].endswith('hello from js')
    assert seen['send']['history'] == 'hello from js'
    assert seen['get'] == {'state': 'TASK_STATE_COMPLETED', 'history': 1}
    kinds = seen['stream']['kinds']
    assert kinds[0] == 'task' and kinds[-1] == 'statusUpdate', kinds
    assert seen['stream']['last'] == 'TASK_STATE_COMPLETED'
    assert seen['stream']['text'] == 'abcdef'
    # TASK_STATE_CANCELLED on the wire, which the SDK maps to its 1.0 TASK_STATE_CANCELED.
    assert seen['cancel'] == {'started': 'TASK_STATE_WORKING', 'state': 'TASK_STATE_CANCELED'}
    # The error body's JSON-RPC `code` gives the SDK its typed error.
    assert seen['missing'] == 'TaskNotFoundError'
    assert seen['push']['created'][1:] == ['js-hook', 'http://127.0.0.1:9/hook']
    assert seen['push']['listed'] == ['js-hook'] and seen['push']['after'] == 0
    assert seen['card'] == 'Volcanic assistant'
    # Without the header, the body's 0.3 shape decides.
    assert seen['bare'] == {'state': 'TASK_STATE_COMPLETED', 'history': 'no header'}
