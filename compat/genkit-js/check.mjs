// Checks, through Loupe's API, what Loupe made of the app in app.mjs that `devui start` runs beside
// it (compat/genkit-js.sh): its actions are listed under its name, a flow runs as a Loupe run
// linked to the app's trace, a streaming flow's chunks are stored, and a prompt whose tool
// interrupts waits in the inbox until a reviewer answers, then the conversation goes on in the app;
// the trace of an interrupted prompt reads as interrupted, not as an error, with the interrupt first
// in its span panel, and the resumed trace links to the interrupted call; Genkit's telemetry API
// returns the app's spans as Genkit's server does and keeps a finished trace's stream open; a run
// of the app is cancelled with its trace id kept; an interrupt Loupe cannot resume fails the run
// and says so.
//
//   LOUPE_URL=http://127.0.0.1:4000 APP_NAME=compat-js node check.mjs
//
// DEVUI_LOG names devui's log, for the checks of what it logs. CHECK_APP_LOGS=1 checks the app's
// own log line (Genkit JS's logger, sent to POST /api/otlp). CHECK_OUT names a file the ids of
// the weather run's trace and its getWeather span are written to (for the genkit CLI's checks).
import { readFileSync, writeFileSync } from 'node:fs';

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

// devuiLog is devui's log so far ('' without DEVUI_LOG).
function devuiLog() {
  return process.env.DEVUI_LOG ? readFileSync(process.env.DEVUI_LOG, 'utf8') : '';
}

// readStream reads path for ms milliseconds, then leaves; ended says whether the server ended
// the response first.
async function readStream(path, ms) {
  const ac = new AbortController();
  const res = await fetch(base + path, { signal: ac.signal });
  const timer = setTimeout(() => ac.abort(), ms);
  let text = '';
  let ended = false;
  try {
    for await (const chunk of res.body) text += Buffer.from(chunk).toString();
    ended = true;
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  } finally {
    clearTimeout(timer);
  }
  return { status: res.status, text, ended };
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
async function checkInterruptedTrace(traceId, tool, question) {
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
  // The span panel leads with the interrupt and its question; the exception Genkit sent (its
  // ToolInterruptError, Go's toolInterruptError) is folded at the end, under "as Genkit sent it".
  const panel = await api('GET', `/traces/${traceId}/spans/${span.span_id}`);
  const ask = panel.text.indexOf('data-testid="span-interrupt"');
  const asSent = panel.text.indexOf('data-testid="as-sent"');
  const exception = panel.text.search(/toolInterruptError/i);
  check(panel.status === 200 && ask >= 0 && panel.text.slice(ask, asSent).includes(question),
    `the ${tool} span panel leads with the interrupt and its question (${question})`, `status ${panel.status}, at ${ask}`);
  check(asSent > ask && (exception === -1 || exception > asSent) && !panel.text.slice(asSent).startsWith('data-testid="as-sent" open'),
    "the exception Genkit sent is folded under 'as Genkit sent it', after the interrupt", `as-sent at ${asSent}, exception at ${exception}`);
  return span;
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
const weatherTrace = run.trace_id;
const weatherRun = id;
const weatherSpan = await until(`the getWeather span of ${weatherTrace} ended`, async () => {
  const r = await api('GET', `/api/v1/traces/${weatherTrace}`);
  const sp = spanNamed(r.json?.roots, 'getWeather');
  return sp && !sp.running && r.json.roots.every((n) => !n.running) ? sp : undefined;
});

// Genkit's telemetry API gives back the app's spans as Genkit's own server does (what
// `genkit trace:get` and the Dev UI read): status code 0 on successful spans, links [] and
// timeEvents {timeEvent: []}; an unknown trace is 200 with no body, which the CLI reads as not found.
const gk = await api('GET', `/api/traces/${weatherTrace}`);
const gkSpans = Object.values(gk.json?.spans || {});
check(gk.status === 200 && gkSpans.length >= 3 && gkSpans.some((sp) => sp.displayName === 'getWeather'),
  `GET /api/traces/{id} returns the app's trace in Genkit's shape (${gkSpans.length} spans)`);
check(gkSpans.every((sp) => sp.status?.code === 0 && Array.isArray(sp.links) && sp.links.length === 0 && Array.isArray(sp.timeEvents?.timeEvent)),
  "its successful spans have Genkit's status code 0, links [] and timeEvents.timeEvent",
  JSON.stringify(gkSpans.map((sp) => [sp.displayName, sp.status, sp.links, sp.timeEvents])));
const unknownTrace = await api('GET', '/api/traces/0123456789abcdef0123456789abcdef');
check(unknownTrace.status === 200 && unknownTrace.text === '', "an unknown trace is 200 with no body, as Genkit's server answers",
  `got ${unknownTrace.status} ${unknownTrace.text}`);

// Genkit's trace stream of the finished trace stays open, as Genkit's server's does, until the
// client leaves: here after 2 s.
const stream = await readStream(`/api/traces/${weatherTrace}/stream`, 2000);
const events = stream.text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
const rootEnded = events.some((e) => (e.span ? [e.span] : Object.values(e.spans || {})).some((sp) => !sp.parentSpanId && sp.endTime > 0));
check(stream.status === 200 && events.length > 0 && events.every((e) => e.traceId === weatherTrace) && rootEnded,
  `GET /api/traces/{id}/stream sends the app's trace, its root ended (${events.length} events)`, stream.text.slice(0, 300));
check(!stream.ended, 'and stays open after the root span ended, until the client leaves');

// The app's own log line (Genkit JS's logger, which Genkit sends through OTel to
// $GENKIT_TELEMETRY_SERVER/api/otlp) is stored with its trace and span: Genkit's log lists, the
// span panel and the run page show it. Genkit Go 1.4.0 exports no logs.
if (process.env.CHECK_APP_LOGS) {
  const logPath = `/api/traces/${weatherTrace}/spans/${weatherSpan.span_id}/logs`;
  const rec = await until(`the app's log line in ${logPath}`, async () => {
    const r = await api('GET', logPath);
    return r.json?.logs?.find((l) => l.body === 'getWeather has no live data');
  });
  check(rec.severityText === 'WARN' && rec.severityNumber === 13 && rec.attributes?.city === 'Oslo' && rec.spanId === weatherSpan.span_id,
    "the app's log line is stored in its tool's span, with its severity and attributes", JSON.stringify(rec));
  const all = await api('GET', '/api/logs');
  check(all.json?.logs?.some((l) => l.traceId === weatherTrace && l.body === rec.body), "GET /api/logs lists it");
  const logPanel = await api('GET', `/traces/${weatherTrace}/spans/${weatherSpan.span_id}`);
  check(logPanel.text.includes('data-testid="log-line"') && logPanel.text.includes('getWeather has no live data'), "the span panel shows it");
  const runPage = await api('GET', `/runs/${weatherRun}?tab=trace`);
  check(runPage.status === 200 && runPage.text.includes('getWeather has no live data'), "the run page's trace tab shows it");
  if (process.env.CHECK_OUT) {
    writeFileSync(process.env.CHECK_OUT, JSON.stringify({ weatherTrace, getWeatherSpan: weatherSpan.span_id }));
  }
}

// A streaming flow: its chunks are the run's.
id = await startRun(key('/flow/countdown'), { from: 3 });
run = await waitRun(id, 'succeeded');
const chunks = (await api('GET', `/api/v1/runs/${id}/chunks`)).json.chunks;
check(JSON.stringify(chunks.map((c) => c.content)) === '[{"n":3},{"n":2},{"n":1}]', 'the streamed chunks are stored in order');

// A run of the app cancelled while it streams: its trace id is known while it runs and kept after
// the cancel, and the stopped chunk flusher logs one line, not a warning per flush.
id = await startRun(key('/flow/countdown'), { from: 60, pauseMs: 200 });
const streaming = await until(`run ${id} running, with its trace id and its first chunks`, async () => {
  const r = await api('GET', `/api/v1/runs/${id}`);
  if (r.json?.status !== 'running' || !r.json.trace_id) return undefined;
  const c = await api('GET', `/api/v1/runs/${id}/chunks`);
  return c.json?.chunks?.length >= 2 ? r.json : undefined;
});
check(/^[0-9a-f]{32}$/.test(streaming.trace_id), `the running run has the app's trace id already (${streaming.trace_id})`);
const cancel = await api('POST', `/api/v1/runs/${id}/cancel`, {});
check(cancel.status === 200 || cancel.status === 202, `POST /api/v1/runs/{id}/cancel is ${cancel.status}`, cancel.text);
run = await until(`run ${id} cancelled`, async () => {
  const r = await api('GET', `/api/v1/runs/${id}`);
  return r.json?.status === 'cancelled' ? r.json : undefined;
});
check(run.trace_id === streaming.trace_id, 'the cancelled run keeps its trace id', `${run.trace_id}`);
if (process.env.DEVUI_LOG) {
  await new Promise((r) => setTimeout(r, 1500)); // the flushes that would have warned
  const lines = devuiLog().split('\n').filter((l) => l.includes(id));
  const flusher = lines.filter((l) => /no longer held/.test(l));
  check(flusher.length <= 1 && !flusher.some((l) => /WARN/.test(l)), `the cancelled run's chunk flusher logs at most one line, no warning (${flusher.length})`,
    flusher.join('\n'));
}

// A prompt whose tool interrupts: the inbox, then the conversation goes on in the app.
id = await startRun(key('/prompt/transferPrompt'), { to: 'Bob', amount: 50 });
run = await waitRun(id, 'interrupted');
const interruptedTrace = run.trace_id;
const interruptedSpan = await checkInterruptedTrace(run.trace_id, 'approveTransfer', 'Send 50 to Bob?');
const it = await resolve(id, { action: 'respond', output: { approved: true } });
check(it.tool === 'approveTransfer' && it.metadata?.message === 'Send 50 to Bob?', "the interrupt asks the app's question");
run = await waitRun(id, 'succeeded');
check(lastText(run) === 'Done: approveTransfer={"approved":true}', `the app's model answered after the reviewer (${lastText(run)})`);
const execs = await until(`both executions' traces of run ${id}`, async () => {
  const r = await api('GET', `/api/v1/traces?run_id=${id}`);
  return r.json?.traces?.length >= 2 ? r.json.traces : undefined;
});
check(execs.length === 2, `GET /api/v1/traces?run_id= finds the resumed run's two executions (${execs.length})`);
// The resumed execution's trace links to the interrupted call itself (its span and turn) and
// numbers its turns on from it.
const resumedTrace = execs.find((t) => t.trace_id !== interruptedTrace)?.trace_id;
const resumedPage = await until(`the resumed trace ${resumedTrace} linked to the interrupted span`, async () => {
  const r = await api('GET', `/traces/${resumedTrace}`);
  return r.text.includes(`data-resumed-span="${interruptedSpan.span_id}"`) ? r.text : undefined;
}, 20);
check(resumedPage.includes('approveTransfer, interrupted in turn 0') && !resumedPage.includes('>turn 0<'),
  'the resumed trace links to the interrupted approveTransfer call in turn 0 and numbers its turns on from it');

// A tool that interrupts until restarted: approving it runs it in the app.
id = await startRun(key('/prompt/wirePrompt'), { to: 'Eve', amount: 7 });
run = await waitRun(id, 'interrupted');
await checkInterruptedTrace(run.trace_id, 'transferMoney', 'Wire 7 to Eve?');
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
// The interrupt's metadata, when the app's reflection API passes it on; Genkit JS 1.42's does not
// (it answers code 13 with an empty message and the ToolInterruptError's stack), and the run says so.
const noMetadata = "the app's reflection API does not pass on the interrupt's metadata";
const withMetadata = (question) =>
  JSON.stringify(run.error.details || {}).includes(question) ? 'with its metadata' : run.error.message.includes(noMetadata) ? 'saying the app did not send its metadata' : '';
let how = withMetadata('Send 420 to LIS?');
check(how !== '', `the run says it ${how}`, JSON.stringify(run.error));
// The same for a tool that calls interrupt() itself (JS) or tc.Interrupt (Go) until restarted.
const wireTool = actions.find((a) => a.key === key('/tool/transferMoney') || a.key === key('/tool.v2/transferMoney'));
id = await startRun(wireTool.key, { to: 'LIS', amount: 420 });
run = await waitFailed(id);
how = withMetadata('Wire 420 to LIS?');
check(run.error?.status === 'FAILED_PRECONDITION' && !run.error.message.includes('code 13') && 'interrupt' in (run.error.details || {}) && how !== '',
  `a tool calling interrupt() run on its own fails FAILED_PRECONDITION, not INTERNAL, ${how}`, JSON.stringify(run.error));

// A flow that returns its interrupts in an object of its own: Loupe cannot resume it, and says so
// rather than calling it a success; the flow's output is kept.
id = await startRun(key('/flow/approvalStatusFlow'), { to: 'Kim', amount: 3 });
run = await waitFailed(id);
check(run.error?.status === 'FAILED_PRECONDITION' && run.error.details?.unresumable === 'generate response' &&
  run.error.message.includes('approveTransfer asks "Send 3 to Kim?"'), 'a flow returning its own interrupted object is no silent success',
  JSON.stringify(run.error));
check(run.output?.status === 'interrupted', "and keeps the flow's output");
const statusPage = await api('GET', `/runs/${id}`);
check(statusPage.status === 200 && statusPage.text.includes('Send 3 to Kim?') && statusPage.text.includes('FAILED_PRECONDITION'),
  'the run page says so, with the question');
if (process.env.DEVUI_LOG) {
  check(devuiLog().split('\n').some((l) => l.includes(id) && l.includes('Loupe cannot resume it')), 'and the log says so, naming the run');
}

// An app without a default model (NO_DEFAULT_MODEL=1): a flow's interrupted response that names no
// model cannot be resumed, and the run says what to add.
if (process.env.NO_DEFAULT_MODEL) {
  id = await startRun(key('/flow/transferFlow'), { to: 'Ann', amount: 9 });
  run = await waitFailed(id);
  check(run.error?.details?.unresumable === 'model' && run.error.message.includes('Add a `model` field'),
    'an interrupted response Loupe cannot resume names what is missing', JSON.stringify(run.error));
  if (process.env.DEVUI_LOG) {
    check(devuiLog().split('\n').some((l) => l.includes(id) && l.includes('missing=model')), 'and the log names it, for the run');
  }
}

// A flow that returns its interrupted generate response (CHECK_FLOW_RESUME=1): resumed through
// the app's /util/generate, its output is the final generate response.
if (process.env.CHECK_FLOW_RESUME) {
  id = await startRun(key('/flow/transferFlow'), { to: 'Ann', amount: 9 });
  run = await waitRun(id, 'interrupted');
  await checkInterruptedTrace(run.trace_id, 'approveTransfer', 'Send 9 to Ann?');
  const fit = await resolve(id, { action: 'respond', output: { approved: true, note: 'ok' } });
  check(fit.metadata?.message === 'Send 9 to Ann?', "the flow's interrupt asks the app's question");
  run = await waitRun(id, 'succeeded');
  check(lastText(run) === 'Done: approveTransfer={"approved":true,"note":"ok"}', `the flow's generate went on in the app (${lastText(run)})`);
}

console.log('all checks passed');
