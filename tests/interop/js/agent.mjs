// A test agent on the official A2A JavaScript SDK (@a2a-js/sdk, pinned in package-lock.json) and
// express, for `volcanic a2a` (tests/interop/test_client_sdk.py): JSON-RPC and HTTP+JSON, each at
// 1.0 and, through the SDK's legacy compatibility layer, 0.3; streaming, push config CRUD
// (in-memory store) and the behaviours the client has to show, chosen by the message text:
//
// - `ask`: input-required with the question "Which city?"; the answer completes the task with
//   "going to <answer>".
// - `slow`: works until canceled.
// - `stream`: an answer in three appended chunks ("one two three"), with a status message first.
// - anything else: the text back as the artifact "response"; every file part comes back as an
//   artifact file named "echo-<name>" with the same bytes.
//
// Every A2A call needs `X-API-Key: <key>` (or `Authorization: Bearer <key>`); the card does not.
// Usage: node agent.mjs --key KEY (listens on 127.0.0.1 only, on a free port; prints
// `js-agent: listening on http://127.0.0.1:PORT` once it accepts connections).

import { parseArgs } from 'node:util';
import express from 'express';
import { AgentCard, TaskState, AGENT_CARD_PATH } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultExecutionEventBusManager,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler } from '@a2a-js/sdk/server/express';

const { values } = parseArgs({ options: { key: { type: 'string' } } });
if (!values.key) {
  console.error('usage: node agent.mjs --key KEY');
  process.exit(2);
}
const key = values.key;

const now = () => new Date().toISOString();
const text = (value) => ({ content: { $case: 'text', value }, metadata: {}, filename: '', mediaType: '' });
const agentMessage = (taskId, contextId, value) => ({
  messageId: crypto.randomUUID(), contextId, taskId, role: 2, parts: [text(value)],
  metadata: {}, extensions: [], referenceTaskIds: [],
});

function textOf(message) {
  return message.parts
    .filter((part) => part.content?.$case === 'text')
    .map((part) => part.content.value)
    .join('\n')
    .trim();
}

class TestExecutor {
  constructor() {
    this.canceled = new Set();
    this.contexts = new Map();
  }

  async execute(context, bus) {
    const { taskId, contextId, userMessage } = context;
    this.contexts.set(taskId, contextId);
    const status = (state, message) => bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, status: { state, message, timestamp: now() }, metadata: {},
    }));
    const artifact = (artifactId, parts, append = false, lastChunk = true) => bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId,
      artifact: { artifactId, name: artifactId, description: '', parts, metadata: {}, extensions: [] },
      append, lastChunk, metadata: {},
    }));
    if (!context.task) {
      bus.publish(AgentEvent.task({
        id: taskId, contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
        artifacts: [], history: [userMessage], metadata: {},
      }));
    }
    const said = textOf(userMessage);
    if (context.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      artifact('response', [text(`going to ${said}`)]);
      status(TaskState.TASK_STATE_COMPLETED);
    } else if (said === 'ask') {
      status(TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(taskId, contextId, 'Which city?'));
    } else if (said === 'slow') {
      status(TaskState.TASK_STATE_WORKING);
      while (!this.canceled.has(taskId)) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return;
    } else if (said === 'stream') {
      status(TaskState.TASK_STATE_WORKING, agentMessage(taskId, contextId, 'thinking'));
      const words = ['one ', 'two ', 'three'];
      for (const [index, word] of words.entries()) {
        artifact('answer', [text(word)], index > 0, index === words.length - 1);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      status(TaskState.TASK_STATE_COMPLETED);
    } else {
      artifact('response', [text(said)]);
      userMessage.parts
        .filter((part) => part.content?.$case === 'raw')
        .forEach((part, index) => artifact(`file-${index}`, [{
          content: { $case: 'raw', value: part.content.value }, metadata: {},
          filename: `echo-${part.filename}`, mediaType: part.mediaType,
        }]));
      status(TaskState.TASK_STATE_COMPLETED);
    }
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    this.canceled.add(taskId);
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId: this.contexts.get(taskId) ?? '', status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() }, metadata: {},
    }));
    bus.finished();
  }
}

// The caller's name becomes the owner scope of its tasks (one caller here).
class Caller {
  get isAuthenticated() { return true; }
  get userName() { return 'tester'; }
}

function keyOf(req) {
  const header = req.get('x-api-key');
  if (header) return header;
  const auth = req.get('authorization') ?? '';
  return auth.startsWith('Bearer ') ? auth.slice(7) : undefined;
}

function cardFor(base) {
  const iface = (path, protocolBinding, protocolVersion) => ({ url: `${base}${path}`, protocolBinding, protocolVersion, tenant: '' });
  return {
    name: 'Test agent (JS SDK)',
    description: 'The behaviours volcanic a2a is tested with.',
    version: '1.0.0',
    supportedInterfaces: [
      iface('/a2a', 'JSONRPC', '1.0'),
      iface('/rest', 'HTTP+JSON', '1.0'),
      iface('/a2a', 'JSONRPC', '0.3'),
      iface('/rest', 'HTTP+JSON', '0.3'),
    ],
    provider: undefined,
    capabilities: { streaming: true, pushNotifications: true, extensions: [] },
    securitySchemes: {
      apiKey: { scheme: { $case: 'apiKeySecurityScheme', value: { location: 'header', name: 'X-API-Key', description: '' } } },
    },
    securityRequirements: [{ schemes: { apiKey: { list: [] } } }],
    defaultInputModes: ['text/plain', 'application/octet-stream'],
    defaultOutputModes: ['text/plain', 'application/octet-stream'],
    skills: [{ id: 'test', name: 'Test', description: 'Test behaviours.', tags: ['test'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
}

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = cardFor(base);
  const handler = new DefaultRequestHandler(
    card, new InMemoryTaskStore(), new TestExecutor(), new DefaultExecutionEventBusManager(), new InMemoryPushNotificationStore(),
  );
  const cardJson = AgentCard.toJSON(card);
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: async () => cardJson }));
  for (const path of ['/a2a', '/rest']) {
    app.use(path, (req, res, next) => {
      if (keyOf(req) !== key) {
        res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'unknown key' });
        return;
      }
      next();
    });
  }
  const options = { requestHandler: handler, userBuilder: async () => new Caller(), legacyCompat: { enabled: true } };
  app.use('/a2a', jsonRpcHandler(options));
  app.use('/rest', restHandler(options));
  console.log(`js-agent: listening on ${base}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
