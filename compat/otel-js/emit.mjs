// Sends one agent run to Loupe through the real OpenTelemetry JS SDK and OTLP/HTTP exporter, its
// spans named and attributed after the OTel GenAI semantic conventions:
//
//   invoke_agent support-bot
//   ├── chat gpt-4o-mini            (asks for two tools)
//   ├── execute_tool lookup_order   (succeeds)
//   ├── execute_tool issue_refund   (fails: refund limit exceeded)
//   └── chat gpt-4o-mini            (answers)
//
// and one WARN log record in the failing tool's span, through the SDK's OTLP/HTTP log exporter.
//
// Usage: LOUPE_URL=http://127.0.0.1:4000 [OTLP_ENCODING=json|protobuf] node emit.mjs
// OTLP_ENCODING picks the trace exporter: exporter-trace-otlp-http (JSON, the default) or
// exporter-trace-otlp-proto (protobuf, encoded by protobufjs).
// Prints {"trace_id": …, "spans": {name: span id}} on stdout; exits non-zero when the export fails.
import { context, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Resource } from '@opentelemetry/resources';
import { OTLPTraceExporter as OTLPJSONTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OTLPProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-http';

const base = process.env.LOUPE_URL;
if (!base) {
  console.error('LOUPE_URL is not set');
  process.exit(2);
}

// The exporter as the SDK ships it, wrapped only to remember whether every export succeeded.
const encoding = process.env.OTLP_ENCODING ?? 'json';
if (encoding !== 'json' && encoding !== 'protobuf') {
  console.error(`OTLP_ENCODING ${encoding}: want json or protobuf`);
  process.exit(2);
}
const Exporter = encoding === 'protobuf' ? OTLPProtoTraceExporter : OTLPJSONTraceExporter;
const exporter = new Exporter({ url: `${base}/v1/traces` });
const failures = [];
const checked = {
  export(spans, done) {
    exporter.export(spans, (result) => {
      if (result.code !== 0) failures.push(result.error ? String(result.error) : `code ${result.code}`);
      done(result);
    });
  },
  shutdown: () => exporter.shutdown(),
  forceFlush: () => exporter.forceFlush(),
};

const provider = new BasicTracerProvider({
  resource: new Resource({ 'service.name': 'support-bot', 'service.version': '1.0.0' }),
});
provider.addSpanProcessor(new SimpleSpanProcessor(checked));
const tracer = provider.getTracer('loupe-compat-otel-js', '1.0.0');

// Logs through the SDK's own OTLP/HTTP log exporter to /v1/logs, each in the span it is written
// in (its trace and span ids from the context), checked the same way.
const logExporter = new OTLPLogExporter({ url: `${base}/v1/logs` });
const loggerProvider = new LoggerProvider({
  resource: new Resource({ 'service.name': 'support-bot', 'service.version': '1.0.0' }),
});
loggerProvider.addLogRecordProcessor(new SimpleLogRecordProcessor({
  export(records, done) {
    logExporter.export(records, (result) => {
      if (result.code !== 0) failures.push(result.error ? `logs: ${result.error}` : `logs: code ${result.code}`);
      done(result);
    });
  },
  shutdown: () => logExporter.shutdown(),
  forceFlush: () => logExporter.forceFlush(),
}));
const logger = loggerProvider.getLogger('loupe-compat-otel-js', '1.0.0');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ids = {};
const within = (span) => trace.setSpan(context.active(), span);

async function chat(parentCtx, name, { input, output, finish, inTok, outTok }) {
  const span = tracer.startSpan('chat gpt-4o-mini', {
    kind: SpanKind.CLIENT,
    attributes: {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.request.temperature': 0.2,
    },
  }, parentCtx);
  await sleep(5);
  span.setAttributes({
    'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
    'gen_ai.response.id': `chatcmpl-${name}`,
    'gen_ai.response.finish_reasons': [finish],
    'gen_ai.usage.input_tokens': inTok,
    'gen_ai.usage.output_tokens': outTok,
    'gen_ai.input.messages': JSON.stringify(input),
    'gen_ai.output.messages': JSON.stringify(output),
  });
  span.end();
  ids[name] = span.spanContext().spanId;
}

async function tool(parentCtx, name, callId, args, run) {
  const span = tracer.startSpan(`execute_tool ${name}`, {
    kind: SpanKind.INTERNAL,
    attributes: {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': name,
      'gen_ai.tool.call.id': callId,
      'gen_ai.tool.type': 'function',
      'gen_ai.tool.call.arguments': JSON.stringify(args),
    },
  }, parentCtx);
  await sleep(3);
  try {
    span.setAttribute('gen_ai.tool.call.result', JSON.stringify(run(args)));
  } catch (err) {
    logger.emit({
      severityNumber: SeverityNumber.WARN, severityText: 'WARN', body: `${name} refused: ${err.message}`,
      attributes: { 'order.id': args.order }, context: within(span),
    });
    span.recordException(err);
    span.setAttribute('error.type', err.name);
    span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
  }
  span.end();
  ids[name] = span.spanContext().spanId;
}

const agent = tracer.startSpan('invoke_agent support-bot', {
  kind: SpanKind.INTERNAL,
  attributes: {
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.agent.name': 'support-bot',
    'gen_ai.provider.name': 'openai',
    'gen_ai.conversation.id': 'conv-42',
  },
});
const agentCtx = within(agent);
const user = { role: 'user', parts: [{ type: 'text', content: 'Where is order 1234? Refund it if it is late.' }] };
const calls = {
  role: 'assistant',
  parts: [
    { type: 'tool_call', id: 'call_lookup', name: 'lookup_order', arguments: { order: '1234' } },
    { type: 'tool_call', id: 'call_refund', name: 'issue_refund', arguments: { order: '1234', amount: 900 } },
  ],
  finish_reason: 'tool_call',
};
await chat(agentCtx, 'chat0', { input: [user], output: [calls], finish: 'tool_calls', inTok: 31, outTok: 12 });
await tool(agentCtx, 'lookup_order', 'call_lookup', { order: '1234' }, () => ({ status: 'late', days: 3 }));
await tool(agentCtx, 'issue_refund', 'call_refund', { order: '1234', amount: 900 }, () => {
  const err = new Error('refund limit exceeded');
  err.name = 'RefundLimit';
  throw err;
});
await chat(agentCtx, 'chat1', {
  input: [user, calls, {
    role: 'tool',
    parts: [
      { type: 'tool_call_response', id: 'call_lookup', response: { status: 'late', days: 3 } },
      { type: 'tool_call_response', id: 'call_refund', response: 'error: refund limit exceeded' },
    ],
  }],
  output: [{ role: 'assistant', parts: [{ type: 'text', content: 'Order 1234 is 3 days late; a person will handle the refund.' }], finish_reason: 'stop' }],
  finish: 'stop', inTok: 58, outTok: 21,
});
agent.end();
ids.agent = agent.spanContext().spanId;

await provider.forceFlush();
await provider.shutdown();
await loggerProvider.forceFlush();
await loggerProvider.shutdown();
if (failures.length > 0) {
  console.error(`export failed: ${failures.join('; ')}`);
  process.exit(1);
}
console.log(JSON.stringify({ trace_id: agent.spanContext().traceId, spans: ids }));
