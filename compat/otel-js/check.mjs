// Checks what Loupe stored and shows of the run emit.mjs sent: the trace list's service, model,
// tokens and tool calls, the turn summary (the failing tool failed), the span tree, the list page
// and the span panel's messages.
//
// Usage: LOUPE_URL=http://127.0.0.1:4000 node check.mjs '<emit.mjs output>'
import assert from 'node:assert/strict';

const base = process.env.LOUPE_URL;
const sent = JSON.parse(process.argv[2] ?? '');
const id = sent.trace_id;
const s = sent.spans;

async function get(path, json = true) {
  const res = await fetch(base + path);
  const body = await res.text();
  assert.equal(res.status, 200, `GET ${path}: ${res.status} ${body.slice(0, 300)}`);
  return json ? JSON.parse(body) : body;
}

const list = await get('/api/v1/traces?source=otlp&limit=50');
const tr = list.traces.find((t) => t.trace_id === id);
assert.ok(tr, `trace ${id} is in /api/v1/traces`);
assert.deepEqual(
  [tr.display_name, tr.source, tr.service, tr.span_count, tr.model, tr.model_calls, tr.input_tokens, tr.output_tokens, tr.tool_calls, tr.tool_errors],
  ['invoke_agent support-bot', 'otlp', 'support-bot', 5, 'gpt-4o-mini', 2, 89, 33, 2, 1],
  'the list summary',
);

const { turns } = await get(`/api/v1/traces/${id}/turns`);
assert.equal(turns.length, 2, 'one turn per chat span');
const [t0, t1] = turns;
assert.deepEqual([t0.index, t0.span_id, t0.model, t0.input_tokens, t0.output_tokens, t0.finish_reason],
  [0, s.chat0, 'gpt-4o-mini', 31, 12, 'tool_calls'], 'turn 0');
assert.deepEqual(t0.tool_calls.map((c) => [c.name, c.span_id, c.call_id, c.state ?? '', c.error ?? '']), [
  ['lookup_order', s.lookup_order, 'call_lookup', '', ''],
  ['issue_refund', s.issue_refund, 'call_refund', 'error', 'refund limit exceeded'],
], 'turn 0 tool calls');
assert.deepEqual([t1.index, t1.span_id, t1.input_tokens, t1.output_tokens, t1.finish_reason, t1.tool_calls.length],
  [1, s.chat1, 58, 21, 'stop', 0], 'turn 1');

const tree = await get(`/api/v1/traces/${id}`);
assert.equal(tree.roots.length, 1);
assert.equal(tree.roots[0].span_id, s.agent);
assert.equal(tree.roots[0].children.length, 4);
const refund = tree.roots[0].children.find((c) => c.span_id === s.issue_refund);
assert.equal(refund.status, 'error');
assert.equal(refund.status_message, 'refund limit exceeded');

const page = await get('/traces?source=otlp', false);
const row = page.match(new RegExp(`<tr data-trace="${id}">[\\s\\S]*?</tr>`))?.[0] ?? '';
assert.match(row, /<span class="service">support-bot<\/span>/, 'the list page shows the service');
assert.match(row, /89 in \/ 33 out/);
assert.match(row, /2 \(1 failed\)/);

const tracePage = await get(`/traces/${id}`, false);
assert.match(tracePage, /lookup_order, issue_refund \(failed\)/, 'the trace page\'s turn summary');
const panel = await get(`/traces/${id}/spans/${s.chat1}`, false);
assert.match(panel, /class="span-messages"/);
assert.match(panel, /← tool response/);
assert.match(panel, /a person will handle the refund/);

// The log record, in its span: Genkit's log list API (all, the trace's, the span's) and the span
// panel.
for (const path of ['/api/logs', `/api/traces/${id}/logs`, `/api/traces/${id}/spans/${s.issue_refund}/logs`]) {
  const { logs } = await get(path);
  const rec = logs.find((l) => l.traceId === id);
  assert.ok(rec, `${path} lists the log record`);
  assert.deepEqual([rec.spanId, rec.severityNumber, rec.severityText, rec.body, rec.attributes['order.id'], rec.resource['service.name']],
    [s.issue_refund, 13, 'WARN', 'issue_refund refused: refund limit exceeded', '1234', 'support-bot'], path);
}
const { logs: none } = await get(`/api/traces/${id}/spans/${s.lookup_order}/logs`);
assert.equal(none.length, 0, 'another span has no log');
const refundPanel = await get(`/traces/${id}/spans/${s.issue_refund}`, false);
assert.match(refundPanel, /data-testid="log-line"/, 'the span panel shows the span\'s log');
assert.match(refundPanel, /issue_refund refused: refund limit exceeded/);

console.log(`ok: trace ${id}: 2 turns, 2 tool calls (1 failed), 89+33 tokens, service support-bot, 1 log record in its span`);
