// Renders the .prompt files of a directory with real Genkit JS (genkit({promptDir})), for
// Loupe's comparison of its own rendering (internal/engine, TestFilePromptRendersAsGenkitJSDoes):
//   node render-prompts.mjs DIR CASES.json > RENDERED.json
// CASES.json is [{"name", "variant"?, "input", "history"?}]; each result is the request
// prompt.render gives: messages, model, config, tools, output.
import { readFileSync } from 'node:fs';
import { genkit } from 'genkit';

const [dir, casesFile] = process.argv.slice(2);
const ai = genkit({ promptDir: dir });
const cases = JSON.parse(readFileSync(casesFile, 'utf8'));
const out = [];
for (const c of cases) {
  const prompt = ai.prompt(c.name, c.variant ? { variant: c.variant } : undefined);
  const req = await prompt.render(c.input, c.history ? { messages: c.history } : undefined);
  out.push({
    name: c.name,
    variant: c.variant,
    messages: req.messages,
    model: req.model,
    config: req.config,
    tools: req.tools,
    output: req.output ? { format: req.output.format, jsonSchema: req.output.jsonSchema } : undefined,
  });
}
process.stdout.write(JSON.stringify(out, null, 2) + '\n');
