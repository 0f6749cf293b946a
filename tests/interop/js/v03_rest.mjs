// The JS SDK's 0.3 HTTP+JSON client (LegacyRestTransport) against a running `volcanic serve`.
// Usage: node v03_rest.mjs BASE_URL KEY. Prints one JSON line of what it saw; exits non-zero on
// any SDK error. tests/interop/test_js_v03_rest.py runs it and checks the line.

import { TaskState } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, RestTransportFactory } from '@a2a-js/sdk/client';
import { LegacyRestTransport } from '@a2a-js/sdk/compat/v0_3/client';

const [base, key] = process.argv.slice(2);
const withKey = (input, init = {}) => fetch(input, { ...init, headers: { ...init.headers, 'X-API-Key': key } });
const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined });
const message = (words) => ({
  messageId: `m-${crypto.randomUUID()}`,
  role: 1, // ROLE_USER
  parts: [text(words)],
  contextId: '',
  taskId: '',
  referenceTaskIds: [],
  extensions: [],
  metadata: undefined,
});
const partsText = (parts) => parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const answer = (task) => partsText(task.artifacts.filter((a) => a.name === 'response').flatMap((a) => a.parts));
const stateName = (state) => TaskState[state];

// A 0.3 agent's view of the card: the blended card without its 1.0 interfaces, read by the SDK's
// legacy card parser, which turns the 0.3 fields into 0.3 interfaces.
const raw = await (await fetch(`${base}/.well-known/agent-card.json`)).json();
delete raw.supportedInterfaces;
const resolver = new DefaultAgentCardResolver({ legacyCompat: { enabled: true }, fetchImpl: withKey });
const factory = new ClientFactory({
  transports: [new RestTransportFactory({ legacyCompat: { enabled: true }, fetchImpl: withKey })],
  preferredTransports: ['HTTP+JSON'],
  cardResolver: resolver,
});
const client = await factory.createFromAgentCard(raw);
const out = { transport: client.transport.constructor.name, protocolVersion: client.protocolVersion };

const sent = await client.sendMessage({ message: message('hello from js'), configuration: undefined, metadata: undefined, tenant: '' });
out.send = { state: stateName(sent.status.state), answer: answer(sent), history: partsText(sent.history[0].parts) };
const got = await client.getTask({ id: sent.id, historyLength: 1, tenant: '' });
out.get = { state: stateName(got.status.state), history: got.history.length };

const events = [];
for await (const event of client.sendMessageStream({
  message: message('faux> {"steps":[{"text":"abcdef","chunk":2}]}'),
  configuration: undefined,
  metadata: undefined,
  tenant: '',
})) {
  events.push(event);
}
out.stream = {
  kinds: events.map((e) => e.payload?.$case),
  last: stateName(events.at(-1).payload.value.status.state),
  text: events.filter((e) => e.payload?.$case === 'artifactUpdate').map((e) => partsText(e.payload.value.artifact.parts)).join(''),
};

const started = await client.sendMessage({
  message: message('faux> {"steps":[{"sleep_ms":10000}]}'),
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true },
  metadata: undefined,
  tenant: '',
});
const canceled = await client.cancelTask({ id: started.id, metadata: undefined, tenant: '' });
out.cancel = { started: stateName(started.status.state), state: stateName(canceled.status.state) };
try {
  await client.getTask({ id: `missing-${crypto.randomUUID()}`, tenant: '' });
  out.missing = 'found';
} catch (error) {
  out.missing = error.constructor.name;
}

const created = await client.createTaskPushNotificationConfig({
  tenant: '', id: 'js-hook', taskId: sent.id, url: 'http://127.0.0.1:9/hook', token: 'js-token-0123', authentication: undefined,
});
const listed = await client.listTaskPushNotificationConfig({ tenant: '', taskId: sent.id, pageSize: 0, pageToken: '' });
await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: sent.id, id: 'js-hook' });
const after = await client.listTaskPushNotificationConfig({ tenant: '', taskId: sent.id, pageSize: 0, pageToken: '' });
out.push = { created: [created.taskId, created.id, created.url], listed: listed.configs.map((c) => c.id), after: after.configs.length };

const card = await client.transport.getExtendedAgentCard({ tenant: '' });
out.card = card.name;

// The transport on its own sends no A2A-Version: the body's shape says 0.3.
const bare = new LegacyRestTransport({ endpoint: `${base}/a2a`, fetchImpl: withKey });
const bareSent = await bare.sendMessage({ message: message('no header'), configuration: undefined, metadata: undefined, tenant: '' });
out.bare = { state: stateName(bareSent.status.state), history: partsText(bareSent.history[0].parts) };

console.log(JSON.stringify(out));
