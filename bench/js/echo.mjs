// The echo agent on the official A2A JavaScript SDK (@a2a-js/sdk) and express, for bench/run.
//
// Equivalent to `volcanic serve --faux` for the benchmark: every message becomes a task whose one
// artifact ("response") holds the input text, completed; tasks live in the SDK's in-memory store;
// every A2A call needs `X-API-Key: <key>` (or `Authorization: Bearer <key>`), the card does not.
// Usage: node echo.mjs --port PORT --key KEY (listens on 127.0.0.1 only).

import { parseArgs } from 'node:util';
import express from 'express';
import { AgentCard, TaskState, AGENT_CARD_PATH } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const { values } = parseArgs({
  options: { port: { type: 'string' }, key: { type: 'string' } },
});
if (!values.port || !values.key) {
  console.error('usage: node echo.mjs --port PORT --key KEY');
  process.exit(2);
}
const port = Number(values.port);
const key = values.key;
const base = `http://127.0.0.1:${port}`;

const card = {
  name: 'Echo agent (JS SDK)',
  description: 'Replies with the input text as one artifact; the benchmark reference.',
  version: '1.0.0',
  supportedInterfaces: [
    { url: `${base}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
  ],
  provider: undefined,
  capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  securitySchemes: {
    apiKey: { scheme: { $case: 'apiKeySecurityScheme', value: { location: 'header', name: 'X-API-Key', description: '' } } },
  },
  securityRequirements: [{ schemes: { apiKey: { list: [] } } }],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'Echo', description: 'Echoes the input.', tags: ['echo'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};

function textOf(message) {
  return message.parts
    .filter((part) => part.content?.$case === 'text')
    .map((part) => part.content.value)
    .join('\n');
}

class EchoExecutor {
  async execute(context, bus) {
    const { taskId, contextId, userMessage } = context;
    if (!context.task) {
      bus.publish(AgentEvent.task({
        id: taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
        artifacts: [],
        history: [userMessage],
        metadata: {},
      }));
    }
    bus.publish(AgentEvent.artifactUpdate({
      taskId,
      contextId,
      artifact: {
        artifactId: 'response',
        name: 'response',
        description: '',
        parts: [{ content: { $case: 'text', value: textOf(userMessage) }, metadata: {}, filename: '', mediaType: '' }],
        metadata: {},
        extensions: [],
      },
      append: false,
      lastChunk: true,
      metadata: {},
    }));
    bus.publish(AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: new Date().toISOString() },
      metadata: {},
    }));
    bus.finished();
  }

  async cancelTask() {}
}

// The caller's name becomes the owner scope of its tasks, as in Volcanic (one caller here).
class Caller {
  get isAuthenticated() { return true; }
  get userName() { return 'bench'; }
}

function keyOf(req) {
  const header = req.get('x-api-key');
  if (header) return header;
  const auth = req.get('authorization') ?? '';
  return auth.startsWith('Bearer ') ? auth.slice(7) : undefined;
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor());
const app = express();
// The SDK's card handler sends the card object as it is; its wire form is the protobuf JSON.
const cardJson = AgentCard.toJSON(card);
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: async () => cardJson }));
app.use('/a2a', (req, res, next) => {
  if (keyOf(req) !== key) {
    res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'unknown key' });
    return;
  }
  next();
});
app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: async () => new Caller() }));

const server = app.listen(port, '127.0.0.1', () => {
  console.log(`js-echo: listening on ${base}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
