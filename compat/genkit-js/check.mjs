// Checks, through Loupe's API, what Loupe made of the app in app.mjs that `devui start` runs beside
// it (compat/genkit-js.sh): its actions are listed under its name, a flow runs as a Loupe run
// linked to the app's trace, a streaming flow's chunks are stored, and a prompt whose tool
// interrupts waits in the inbox until a reviewer answers, then the conversation goes on in the app;
// the trace of an interrupted prompt reads as interrupted, not as an error.
//
//   LOUPE_URL=http://127.0.0.1:4000 APP_NAME=compat-js node check.mjs
const base = process.env.LOUPE_URL;
const app = process.env.APP_NAME || 'compat-js';
if (!base) throw new Error('LOUPE_URL is not set');

const key = (k) => `${app}:${k}`;

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

async function until(what, fn, seconds = 60) {
  const deadline = Date.now() + seconds * 1000;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

// check prints msg when cond holds, and fails with msg and detail when not.
function check(cond, msg, detail = '') {
  if (!cond) throw new Error(`check failed: ${msg}${detail ? ` (${detail})` : ''}`);
  console.log('ok   ' + msg);
}

async function startRun(action, input) {
  const r = await api('POST', '/api/v1/runs', { action, input });
  check(r.status === 201, `POST /api/v1/runs ${action} is 201`, `got ${r.status} ${r.text}`);
  return r.json.id;
}

async function waitRun(id, status) {
  return until(`run ${id} to be ${status}`, async () => {
    const r = await api('GET', `/api/v1/runs/${id}`);
    if (r.json?.status === 'failed') throw new Error(`run ${id} failed: ${JSON.stringify(r.json.error)}`);
    return r.json?.status === status ? r.json : undefined;
  });
}

async function waitFailed(id) {
  return until(`run ${id} to fail`, async () => {
    const r = await api('GET', `/api/v1/runs/${id}`);
    if (r.json?.status === 'succeeded') throw new Error(`run ${id} succeeded: ${JSON.stringify(r.json.output)}`);
    return r.json?.status === 'failed' ? r.json : undefined;
  });
}

function lastText(run) {
  const m = run.messages[run.messages.length - 1].content;
  return m.content.map((p) => p.text || '').join('');
}

// doneWith says whether the scripted model's answer quotes the tool's output: Genkit JS keeps the
// output's key order, Genkit Go (whose restarted tool's output is a map) sorts the keys.
function doneWith(text, tool, output) {
  const prefix = `Done: ${tool}=`;
  if (!text.startsWith(prefix)) return false;
  try {
    const got = JSON.parse(text.slice(prefix.length));
    return Object.keys(output).length === Object.keys(got).length && Object.entries(output).every(([k, v]) => got[k] === v);
  } catch {
    return false;
  }
}

async function resolve(runId, decision) {
  const it = await until(`an interrupt of run ${runId} in the inbox`, async () => {
    const r = await api('GET', '/api/v1/interrupts?status=pending');
    return r.json?.interrupts?.find((i) => i.run_id === runId);
  });
  const r = await api('POST', `/api/v1/interrupts/${it.id}/resolve`, decision);
  check(r.status === 200, `resolve ${it.tool} with ${decision.action} is 200`, `got ${r.status} ${r.text}`);
  return it;
}

// spanNamed finds the span named name in a trace tree's nodes.
function spanNamed(nodes, name) {
  for (const n of nodes || []) {
    if (n.name === name) return n;
    const found = spanNamed(n.children, name);
    if (found) return found;
  }
  return undefined;
}

// checkInterruptedTrace checks that the app's trace of an interrupted run reads as interrupted,
// not failed: the tool's span is interrupted (Genkit sends it as an error), nothing in the trace
// counts as an error, and the error filter of the trace list leaves it out.
async function checkInterruptedTrace(traceId, tool) {
  check(/^[0-9a-f]{32}$/.test(traceId || ''), `the interrupted run has the app's trace id (${traceId})`);
  // Once the root has ended and the tool's span with it, the whole trace is in.
  const tree = await until(`trace ${traceId} with its root and ${tool} ended`, async () => {
    const r = await api('GET', `/api/v1/traces/${traceId}`);
    if (r.status !== 200 || !r.json.trace?.root_span_id) return undefined;
    const sp = spanNamed(r.json.roots, tool);
    return sp && !sp.running && r.json.roots.every((n) => !n.running) ? r.json : undefined;
  });
  const span = spanNamed(tree.roots, tool);
  check(span.status === 'interrupted', `the app's ${tool} span reads as interrupted (${span.status})`);
  check(tree.trace.error_spans === 0 && tree.trace.tool_errors === 0, `the interrupted trace counts no error`,
    `error_spans ${tree.trace.error_spans}, tool_errors ${tree.trace.tool_errors}`);
  const errors = await api('GET', '/api/v1/traces?status=error&limit=1000');
  check(errors.status === 200, 'GET /api/v1/traces?status=error is 200', `got ${errors.status} ${errors.text}`);
  check(!errors.json.traces.some((t) => t.trace_id === traceId), 'the error filter of the trace list leaves the interrupted trace out');
  check(errors.json.traces.some((t) => t.trace_id === controlErrorTrace), 'and lists a trace that did fail (so the filter is not simply empty)');
  const interrupted = await api('GET', '/api/v1/traces?status=interrupted&limit=1000');
  check(interrupted.status === 200 && interrupted.json.traces.some((t) => t.trace_id === traceId && t.interrupted),
    'the interrupted filter of the trace list finds the trace', `got ${interrupted.status}`);
  const page = await api('GET', '/traces?status=interrupted');
  check(page.status === 200 && page.text.includes(`<tr data-trace="${traceId}">`) && page.text.includes('badge interrupted'),
    'the traces page lists it as interrupted');
}

// controlErrorTrace is a trace whose one span failed, sent in Genkit's telemetry shape, against
// which the error filter is checked both ways.
const controlErrorTrace = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, '0')).join('');
{
  const now = Date.now();
  const r = await api('POST', '/api/traces', {
    traceId: controlErrorTrace,
    spans: {
      '00000000000000c1': {
        spanId: '00000000000000c1', traceId: controlErrorTrace, startTime: now - 5, endTime: now,
        displayName: 'failingStep', spanKind: 'INTERNAL', instrumentationLibrary: { name: 'genkit-tracer' },
        attributes: { 'genkit:name': 'failingStep', 'genkit:type': 'action', 'genkit:state': 'error' },
        status: { code: 2, message: 'it broke' },
      },
    },
  });
  check(r.status === 200, 'a failed control trace is taken by POST /api/traces', `got ${r.status} ${r.text}`);
}

// The app's actions, under its name.
const actions = await until(`${app}'s actions in GET /api/v1/actions`, async () => {
  const r = await api('GET', '/api/v1/actions');
  const list = r.json?.actions || [];
  return list.some((a) => a.key === key('/flow/weatherFlow')) ? list : undefined;
});
for (const k of ['/flow/weatherFlow', '/flow/countdown', '/prompt/transferPrompt', '/model/scripted', '/util/generate']) {
  check(actions.some((a) => a.key === key(k)), `the app's ${k} is listed as ${key(k)}`);
}
// Genkit JS lists a tool as /tool/<name> (and /tool.v2/<name>), Genkit Go 1.4.0 as /tool.v2/<name> only.
const tool = actions.find((a) => a.key === key('/tool/approveTransfer') || a.key === key('/tool.v2/approveTransfer'));
check(tool, `the app's tool approveTransfer is listed (${tool?.key})`);
const page = await api('GET', '/actions');
check(page.status === 200 && page.text.includes(`data-app="${app}"`), 'the Actions page shows the app');

// A flow with a tool: a Loupe run, linked to the trace the app recorded.
let id = await startRun(key('/flow/weatherFlow'), { city: 'Oslo' });
let run = await waitRun(id, 'succeeded');
check(run.output === 'Done: getWeather={"city":"Oslo","tempC":21}', `the flow's output is the app's (${JSON.stringify(run.output)})`);
check(/^[0-9a-f]{32}$/.test(run.trace_id || ''), `the run has the app's trace id (${run.trace_id})`);
const tree = await until(`trace ${run.trace_id} in Loupe`, async () => {
  const r = await api('GET', `/api/v1/traces/${run.trace_id}`);
  return r.status === 200 && JSON.stringify(r.json).includes('weatherFlow') ? r.json : undefined;
});
check(JSON.stringify(tree).includes('getWeather'), "the app's trace holds the tool's span");

// A streaming flow: its chunks are the run's.
id = await startRun(key('/flow/countdown'), { from: 3 });
run = await waitRun(id, 'succeeded');
const chunks = (await api('GET', `/api/v1/runs/${id}/chunks`)).json.chunks;
check(JSON.stringify(chunks.map((c) => c.content)) === '[{"n":3},{"n":2},{"n":1}]', 'the streamed chunks are stored in order');

// A prompt whose tool interrupts: the inbox, then the conversation goes on in the app.
id = await startRun(key('/prompt/transferPrompt'), { to: 'Bob', amount: 50 });
run = await waitRun(id, 'interrupted');
await checkInterruptedTrace(run.trace_id, 'approveTransfer');
const it = await resolve(id, { action: 'respond', output: { approved: true } });
check(it.tool === 'approveTransfer' && it.metadata?.message === 'Send 50 to Bob?', "the interrupt asks the app's question");
run = await waitRun(id, 'succeeded');
check(lastText(run) === 'Done: approveTransfer={"approved":true}', `the app's model answered after the reviewer (${lastText(run)})`);
const execs = await until(`both executions' traces of run ${id}`, async () => {
  const r = await api('GET', `/api/v1/traces?run_id=${id}`);
  return r.json?.traces?.length >= 2 ? r.json.traces : undefined;
});
check(execs.length === 2, `GET /api/v1/traces?run_id= finds the resumed run's two executions (${execs.length})`);

// A tool that interrupts until restarted: approving it runs it in the app.
id = await startRun(key('/prompt/wirePrompt'), { to: 'Eve', amount: 7 });
run = await waitRun(id, 'interrupted');
await checkInterruptedTrace(run.trace_id, 'transferMoney');
await resolve(id, { action: 'approve' });
run = await waitRun(id, 'succeeded');
check(doneWith(lastText(run), 'transferMoney', { done: true, to: 'Eve', amount: 7 }), `the restarted tool ran in the app (${lastText(run)})`);

// /util/generate itself, denied.
id = await startRun(key('/util/generate'), {
  model: 'scripted',
  tools: ['approveTransfer'],
  messages: [{ role: 'user', content: [{ text: 'send 5 to Zed' }] }],
});
await waitRun(id, 'interrupted');
await resolve(id, { action: 'deny', comment: 'not today' });
run = await waitRun(id, 'succeeded');
check(lastText(run).includes('"denied":true'), 'a denial reaches the model as the tool answer');

// The interrupting tool run on its own: nothing can pause, so the run fails, saying that the tool
// asked a person (FAILED_PRECONDITION, the interrupt in its details), never INTERNAL.
id = await startRun(tool.key, { to: 'LIS', amount: 420 });
run = await waitFailed(id);
check(run.error?.status === 'FAILED_PRECONDITION' && run.error.message.includes('interrupted to ask a person'),
  'the interrupting tool run on its own says it asked a person', JSON.stringify(run.error));
check(!run.error.message.includes('code 13') && 'interrupt' in (run.error.details || {}), 'not INTERNAL, with the interrupt');

// A flow that returns its interrupts in an object of its own: Loupe cannot resume it, and says so
// rather than calling it a success; the flow's output is kept.
id = await startRun(key('/flow/approvalStatusFlow'), { to: 'Kim', amount: 3 });
run = await waitFailed(id);
check(run.error?.status === 'FAILED_PRECONDITION' && run.error.details?.unresumable === 'generate response' &&
  run.error.message.includes('approveTransfer asks "Send 3 to Kim?"'), 'a flow returning its own interrupted object is no silent success',
  JSON.stringify(run.error));
check(run.output?.status === 'interrupted', "and keeps the flow's output");

// An app without a default model (NO_DEFAULT_MODEL=1): a flow's interrupted response that names no
// model cannot be resumed, and the run says what to add.
if (process.env.NO_DEFAULT_MODEL) {
  id = await startRun(key('/flow/transferFlow'), { to: 'Ann', amount: 9 });
  run = await waitFailed(id);
  check(run.error?.details?.unresumable === 'model' && run.error.message.includes('Add a `model` field'),
    'an interrupted response Loupe cannot resume names what is missing', JSON.stringify(run.error));
}

// A flow that returns its interrupted generate response (CHECK_FLOW_RESUME=1): resumed through
// the app's /util/generate, its output is the final generate response.
if (process.env.CHECK_FLOW_RESUME) {
  id = await startRun(key('/flow/transferFlow'), { to: 'Ann', amount: 9 });
  run = await waitRun(id, 'interrupted');
  await checkInterruptedTrace(run.trace_id, 'approveTransfer');
  const fit = await resolve(id, { action: 'respond', output: { approved: true, note: 'ok' } });
  check(fit.metadata?.message === 'Send 9 to Ann?', "the flow's interrupt asks the app's question");
  run = await waitRun(id, 'succeeded');
  check(lastText(run) === 'Done: approveTransfer={"approved":true,"note":"ok"}', `the flow's generate went on in the app (${lastText(run)})`);
}

console.log('all checks passed');
