// A Genkit JS app with a scripted model, for Loupe's compatibility tests (compat/genkit-js.sh and the
// Go tests of internal/genkitapp). Everything it answers is deterministic, so a test can check the
// exact text. Run it with GENKIT_ENV=dev: Genkit then starts its reflection server and writes a runtime
// file under .genkit/runtimes/ of this folder (the nearest package.json), which Loupe discovers.
//
// The scripted model reads the conversation:
//   - the last message is a tool's answer -> it answers in text, quoting the tool's output;
//   - the user asks for the weather -> it requests getWeather;
//   - the user asks to transfer (or "send") money -> it requests approveTransfer (an interrupt);
//   - the user asks to wire money -> it requests transferMoney (a tool that interrupts until restarted);
//   - the user asks to e-mail someone -> it requests sendEmail; to post a memo -> postMemo;
//   - otherwise it echoes the prompt.
// It streams its text word by word when the caller streams.
import { appendFileSync } from 'node:fs';
import { genkit, z } from 'genkit/beta';
import { logger } from 'genkit/logging';
import { genkitEval, GenkitMetric } from '@genkit-ai/evaluator';

// The default model lets Loupe resume a flow's interrupted response, which names no model. With
// NO_DEFAULT_MODEL=1 the app has none, and a second model (so that its only model is not taken
// for the default either): transferFlow's interrupted response then cannot be resumed.
const noDefaultModel = !!process.env.NO_DEFAULT_MODEL;
// @genkit-ai/evaluator's metrics that need no model: its evaluators genkitEval/deep_equal and
// genkitEval/regex score Loupe's experiments as the app's own do.
const ai = genkit({
  name: process.env.APP_NAME || 'compat-js',
  plugins: [genkitEval({ metrics: [GenkitMetric.DEEP_EQUAL, GenkitMetric.REGEX] })],
  ...(noDefaultModel ? {} : { model: 'scripted' }),
});

function lastText(messages, role) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (role && m.role !== role) continue;
    const text = (m.content || [])
      .map((p) => p.text || '')
      .join('')
      .trim();
    if (text) return text;
  }
  return '';
}

function parseTransfer(text) {
  const amount = Number((text.match(/(\d+(?:\.\d+)?)/) || [])[1] || 0);
  const to = (text.match(/\bto\s+([A-Za-z]+)/) || [])[1] || 'nobody';
  return { to, amount };
}

let refCounter = 0;

const scripted = ai.defineModel(
  {
    name: 'scripted',
    label: 'Scripted model',
    apiVersion: 'v2',
    supports: { multiturn: true, tools: true, systemRole: true },
  },
  async (request, { sendChunk, streamingRequested }) => {
    const messages = request.messages || [];
    const last = messages[messages.length - 1];
    let content;
    if (last && last.role === 'tool') {
      const outputs = last.content
        .filter((p) => p.toolResponse)
        .map((p) => `${p.toolResponse.name}=${JSON.stringify(p.toolResponse.output)}`);
      content = [{ text: `Done: ${outputs.join(', ')}` }];
    } else {
      const prompt = lastText(messages, 'user');
      const tools = new Set((request.tools || []).map((t) => t.name));
      const ref = () => `r${++refCounter}`;
      if (/weather/i.test(prompt) && tools.has('getWeather')) {
        const city = (prompt.match(/\bin\s+([A-Za-z]+)/) || [])[1] || 'Paris';
        content = [{ toolRequest: { name: 'getWeather', ref: ref(), input: { city } } }];
      } else if (/\b(transfer|send)\b/i.test(prompt) && tools.has('approveTransfer')) {
        content = [{ toolRequest: { name: 'approveTransfer', ref: ref(), input: parseTransfer(prompt) } }];
      } else if (/\bmail\b/i.test(prompt) && tools.has('sendEmail')) {
        const to = (prompt.match(/\bto\s+(\S+)/) || [])[1] || 'nobody';
        content = [{ toolRequest: { name: 'sendEmail', ref: ref(), input: { to, subject: 'hello' } } }];
      } else if (/\bmemo\b/i.test(prompt) && tools.has('postMemo')) {
        content = [{ toolRequest: { name: 'postMemo', ref: ref(), input: { text: prompt } } }];
      } else if (/\bwire\b/i.test(prompt) && tools.has('transferMoney')) {
        content = [{ toolRequest: { name: 'transferMoney', ref: ref(), input: parseTransfer(prompt) } }];
      } else {
        content = [{ text: `You said: ${prompt}` }];
      }
    }
    if (streamingRequested) {
      for (const part of content) {
        if (!part.text) continue;
        for (const word of part.text.split(/(?<= )/)) {
          sendChunk({ content: [{ text: word }] });
        }
      }
    }
    return {
      message: { role: 'model', content },
      finishReason: 'stop',
      usage: { inputTokens: messages.length, outputTokens: content.length },
    };
  }
);

if (noDefaultModel) {
  ai.defineModel({ name: 'other', apiVersion: 'v2' }, async () => ({
    message: { role: 'model', content: [{ text: 'other' }] },
    finishReason: 'stop',
  }));
}

const getWeather = ai.defineTool(
  {
    name: 'getWeather',
    description: 'The current weather in a city',
    inputSchema: z.object({ city: z.string() }),
    outputSchema: z.object({ city: z.string(), tempC: z.number() }),
  },
  async ({ city }) => {
    // Genkit's logger writes the line to the console and, through OTel, to the telemetry server
    // (POST $GENKIT_TELEMETRY_SERVER/api/otlp) with this tool's span.
    logger.warn('getWeather has no live data', { city });
    return { city, tempC: 21 };
  }
);

// approveTransfer asks a person; a reviewer answers it (resume.respond) with {approved, note?}.
const approveTransfer = ai.defineInterrupt({
  name: 'approveTransfer',
  description: 'Ask a person to approve a money transfer',
  inputSchema: z.object({ to: z.string(), amount: z.number() }),
  outputSchema: z.object({ approved: z.boolean(), note: z.string().optional() }),
  requestMetadata: (input) => ({ message: `Send ${input.amount} to ${input.to}?` }),
});

// transferMoney interrupts until it is restarted (resume.restart), then executes.
const transferMoney = ai.defineTool(
  {
    name: 'transferMoney',
    description: 'Transfer money; needs a confirmation first',
    inputSchema: z.object({ to: z.string(), amount: z.number() }),
    outputSchema: z.object({ done: z.boolean(), to: z.string(), amount: z.number() }),
  },
  async (input, { interrupt, resumed }) => {
    if (!resumed) interrupt({ message: `Wire ${input.amount} to ${input.to}?` });
    return { done: true, to: input.to, amount: input.amount };
  }
);

// sendEmail and postMemo act: each call appends a line to the file $OUTBOX names, so a test sees
// whether, how often and with what the app ran them. postMemo asks Loupe for a person's approval
// before it runs, by its metadata (loupe.RequireApproval's key); sendEmail is gated by a policy rule.
function outbox(line) {
  if (process.env.OUTBOX) appendFileSync(process.env.OUTBOX, line + '\n');
}

const sendEmail = ai.defineTool(
  {
    name: 'sendEmail',
    description: 'Send an e-mail',
    inputSchema: z.object({ to: z.string(), subject: z.string() }),
    outputSchema: z.object({ sent: z.boolean(), to: z.string() }),
  },
  async ({ to, subject }) => {
    outbox(`sendEmail ${to} ${subject}`);
    return { sent: true, to };
  }
);

const postMemo = ai.defineTool(
  {
    name: 'postMemo',
    description: 'Post a memo to everyone',
    inputSchema: z.object({ text: z.string() }),
    outputSchema: z.object({ posted: z.boolean() }),
    metadata: { 'loupe.requireApproval': true },
  },
  async ({ text }) => {
    outbox(`postMemo ${text}`);
    return { posted: true };
  }
);

ai.defineFlow(
  {
    name: 'weatherFlow',
    inputSchema: z.object({ city: z.string() }),
    outputSchema: z.string(),
  },
  async ({ city }) => {
    const response = await ai.generate({
      model: scripted,
      prompt: `What is the weather in ${city}?`,
      tools: [getWeather],
    });
    return response.text;
  }
);

// countdown streams from, from-1, ..., 1. With pauseMs it waits that long after each chunk, so a
// test can watch the chunks arrive while the flow still runs.
ai.defineFlow(
  {
    name: 'countdown',
    inputSchema: z.object({ from: z.number().int(), pauseMs: z.number().int().min(0).max(10000).optional() }),
    outputSchema: z.string(),
    streamSchema: z.object({ n: z.number() }),
  },
  async ({ from, pauseMs }, { sendChunk }) => {
    for (let n = from; n > 0; n--) {
      sendChunk({ n });
      if (pauseMs) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
    return 'liftoff';
  }
);

ai.defineFlow({ name: 'echo', inputSchema: z.string(), outputSchema: z.string() }, async (text) => `echo: ${text}`);

// sameAsReference is an evaluator that needs no model, for Loupe's experiments scored by the app's
// own evaluators: it passes a datapoint whose output equals its reference (as JSON), says why in
// details.reasoning, and throws for an input of "boom" (Genkit then answers evaluation.error).
ai.defineEvaluator(
  {
    name: 'sameAsReference',
    displayName: 'Same as reference',
    definition: 'The output equals the reference (as JSON)',
    isBilled: false,
  },
  async (datapoint) => {
    if (datapoint.input === 'boom') throw new Error('cannot score boom');
    const got = JSON.stringify(datapoint.output ?? null);
    const want = JSON.stringify(datapoint.reference ?? null);
    const same = got === want;
    return {
      testCaseId: datapoint.testCaseId,
      evaluation: {
        score: same,
        status: same ? 'PASS' : 'FAIL',
        details: { reasoning: `compat-js says: ${got} ${same ? 'equals' : 'differs from'} ${want}` },
      },
    };
  }
);

// transferFlow returns the whole generate response, so when the transfer interrupts, the flow's
// output is the interrupted response itself, which Loupe can resume through /util/generate.
ai.defineFlow(
  { name: 'transferFlow', inputSchema: z.object({ to: z.string(), amount: z.number() }) },
  async ({ to, amount }) => {
    const response = await ai.generate({
      model: scripted,
      prompt: `Please transfer ${amount} to ${to}`,
      tools: [approveTransfer],
    });
    return response.toJSON();
  }
);

// approvalStatusFlow handles the interrupt its own way: it returns an object of its own with the
// interrupted tool requests in it, which Loupe cannot resume (and says so).
ai.defineFlow(
  { name: 'approvalStatusFlow', inputSchema: z.object({ to: z.string(), amount: z.number() }) },
  async ({ to, amount }) => {
    const response = await ai.generate({
      model: scripted,
      prompt: `Please transfer ${amount} to ${to}`,
      tools: [approveTransfer],
    });
    if (response.finishReason === 'interrupted') return { status: 'interrupted', pending: { interrupts: response.interrupts } };
    return { status: 'done', text: response.text };
  }
);

ai.definePrompt({
  name: 'transferPrompt',
  description: 'Transfers money after a person approves it',
  model: scripted,
  input: { schema: z.object({ to: z.string(), amount: z.number() }) },
  tools: [approveTransfer, transferMoney],
  prompt: 'Please transfer {{amount}} to {{to}}',
});

ai.definePrompt({
  name: 'wirePrompt',
  description: 'Wires money; the tool itself asks for confirmation and runs when restarted',
  model: scripted,
  input: { schema: z.object({ to: z.string(), amount: z.number() }) },
  tools: [transferMoney],
  prompt: 'Please wire {{amount}} to {{to}}',
});

ai.definePrompt({
  name: 'emailPrompt',
  description: 'E-mails someone',
  model: scripted,
  input: { schema: z.object({ to: z.string() }) },
  tools: [sendEmail],
  prompt: 'Please mail to {{to}}',
});

ai.definePrompt({
  name: 'memoPrompt',
  description: 'Posts a memo',
  model: scripted,
  input: { schema: z.object({ text: z.string() }) },
  tools: [postMemo],
  prompt: 'Post this memo: {{text}}',
});

// Keep the process alive: the reflection server runs only while it does.
setInterval(() => {}, 1 << 30);
