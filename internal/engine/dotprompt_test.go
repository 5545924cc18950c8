package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

// testdata/prompts is a prompts directory as a Genkit JS app has it: a partial, a variant, a
// subdirectory, Picoschema and JSON Schema inputs, JSON output with a schema, tools, roles, media
// and history.

// TestLoadPromptDirRegistersEachFileWithItsSchemas checks the names Genkit JS gives the files
// (variant after a dot, subdirectory as a prefix, partials not registered) and that the front
// matter's input and output schemas, model, config, tools and maxTurns are in the catalogue.
func TestLoadPromptDirRegistersEachFileWithItsSchemas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := engine.LoadPromptDir(b.r, "testdata/prompts")
	require.NoError(t, err)
	var keys []string
	for _, d := range b.r.List() {
		keys = append(keys, d.Key)
	}
	require.Equal(t, []string{"/prompt/recipe", "/prompt/recipe.quick", "/prompt/support/triage", "/util/generate"}, keys)

	recipe := b.r.Lookup("/prompt/recipe").Desc()
	require.Equal(t, "Suggests a recipe from a photo of the fridge.", recipe.Description)
	require.JSONEq(t, `{"type":"object","required":["dish","photoUrl"],"properties":{
		"dish":{"type":"string","description":"the dish the user wants"},
		"servings":{"anyOf":[{"type":"integer"},{"type":"null"}],"type":"integer"},
		"photoUrl":{"type":"string"},
		"tone":{"anyOf":[{"type":"string"},{"type":"null"}],"type":"string"},
		"limit":{"anyOf":[{"type":"integer","description":"most sentences"},{"type":"null"}],"type":"integer","description":"most sentences"}}}`, string(recipe.InputSchema.Raw()))
	meta := recipe.Metadata["prompt"].(map[string]any)
	require.Equal(t, "googleai/gemini-2.5-flash", meta["model"])
	require.Equal(t, []string{"lookupPantry"}, meta["tools"])
	require.Equal(t, 3, meta["maxTurns"])
	out, err := json.Marshal(meta["output"])
	require.NoError(t, err)
	require.JSONEq(t, `{"format":"json","schema":{"type":"object","required":["ingredients","minutes","title"],"properties":{
		"title":{"type":"string"},"ingredients":{"type":"array","items":{"type":"string"}},"minutes":{"type":"integer"}}}}`, string(out))

	quick := b.r.Lookup("/prompt/recipe.quick").Desc()
	require.Equal(t, "quick", quick.Metadata["prompt"].(map[string]any)["variant"])
	require.Equal(t, "recipe", quick.Metadata["prompt"].(map[string]any)["name"])

	triage := b.r.Lookup("/prompt/support/triage").Desc()
	require.JSONEq(t, `{"type":"object","properties":{"customer":{"type":"string","minLength":1}},"required":["customer"]}`, string(triage.InputSchema.Raw()))
}

// TestFilePromptRendersRolesPartialsMediaAndDefaults asserts the messages the Dotprompt spec
// gives for recipe.prompt: {{role}} starts a message, the partial renders with the input, the
// front matter's defaults fill servings and limit, and {{media}} is a media part.
func TestFilePromptRendersRolesPartialsMediaAndDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := engine.LoadPromptDir(b.r, "testdata/prompts")
	require.NoError(t, err)
	p := b.r.Lookup("/prompt/recipe").(*engine.FilePrompt)
	msgs, err := p.Render(json.RawMessage(`{"dish":"soup","photoUrl":"https://example.com/fridge.jpg","tone":"brisk"}`), nil)
	require.NoError(t, err)
	got, err := json.Marshal(msgs)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"system","content":[{"text":"\nYou are a chef. Answer in a brisk tone, in at most 3 sentences.\n\n\n"}]},
		{"role":"user","content":[{"text":"\nMake soup for 2 people with what you see here:\n"},
			{"media":{"url":"https://example.com/fridge.jpg","contentType":"image/jpeg"}}]}]`, string(got))

	_, err = p.Render(json.RawMessage(`{"dish":"soup"}`), nil)
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err), "photoUrl is required by the Picoschema")
	_, err = p.Render(nil, nil)
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err), "no input is {}, which lacks the required fields")
	_, err = p.Render(json.RawMessage(`["soup"]`), nil)
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err), "an input that is not an object")

	triage := b.r.Lookup("/prompt/support/triage").(*engine.FilePrompt)
	_, err = triage.Render(json.RawMessage(`{"customer":""}`), nil)
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err), "JSON Schema's minLength holds")
}

// TestFilePromptRendersAsGenkitJSDoes renders testdata/prompts.cases.json with Loupe and compares
// with testdata/prompts.genkit-js.json, what real Genkit JS 1.42.0 rendered from the same files
// (its prompt.render): the same messages (roles, text, media, history), model, config, tools and
// output format and schema. Two differences are the libraries' and are taken out before comparing:
// Genkit JS's Picoschema adds additionalProperties: false to an object, and lists required
// properties in the file's order where the Go library sorts them. Regenerate the file with
//
//	cd compat/genkit-js && npm ci && node render-prompts.mjs ../../internal/engine/testdata/prompts \
//	  ../../internal/engine/testdata/prompts.cases.json > ../../internal/engine/testdata/prompts.genkit-js.json
func TestFilePromptRendersAsGenkitJSDoes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := engine.LoadPromptDir(b.r, "testdata/prompts")
	require.NoError(t, err)
	var cases []struct {
		Name    string            `json:"name"`
		Variant string            `json:"variant"`
		Input   json.RawMessage   `json:"input"`
		History []*engine.Message `json:"history"`
	}
	raw, err := os.ReadFile("testdata/prompts.cases.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &cases))
	raw, err = os.ReadFile("testdata/prompts.genkit-js.json")
	require.NoError(t, err)
	var want []map[string]any
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Len(t, want, len(cases))

	for i, c := range cases {
		name := c.Name
		if c.Variant != "" {
			name += "." + c.Variant
		}
		p := b.r.Lookup("/prompt/" + name).(*engine.FilePrompt)
		msgs, err := p.Render(c.Input, c.History)
		require.NoError(t, err, name)
		var desc map[string]any
		metaJSON, err := json.Marshal(p.Desc().Metadata["prompt"])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(metaJSON, &desc))
		got := map[string]any{"name": c.Name, "messages": msgs, "model": desc["model"]}
		if c.Variant != "" {
			got["variant"] = c.Variant
		}
		if cfg, _ := desc["config"].(map[string]any); len(cfg) > 0 {
			got["config"] = cfg
		}
		if tools, _ := desc["tools"].([]any); len(tools) > 0 {
			got["tools"] = tools
		}
		out := map[string]any{}
		if o := desc["output"].(map[string]any); o["format"] != "" {
			out["format"] = o["format"]
			out["jsonSchema"] = o["schema"]
		}
		got["output"] = out
		require.JSONEq(t, normalizeSchemas(t, want[i]), normalizeSchemas(t, got), name)
	}
}

// normalizeSchemas is v as JSON with additionalProperties: false dropped and required lists
// sorted, the two ways Genkit JS's Picoschema and Go's differ.
func normalizeSchemas(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc))
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if x["additionalProperties"] == false {
				delete(x, "additionalProperties")
			}
			if req, ok := x["required"].([]any); ok {
				slices.SortFunc(req, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
			}
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(doc)
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	return string(raw)
}

// TestFilePromptPutsHistoryWhereTheTemplateSays asserts that {{history}} is replaced by the
// conversation so far, each message tagged purpose: history, as Dotprompt does.
func TestFilePromptPutsHistoryWhereTheTemplateSays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := engine.LoadPromptDir(b.r, "testdata/prompts")
	require.NoError(t, err)
	p := b.r.Lookup("/prompt/support/triage").(*engine.FilePrompt)
	msgs, err := p.Render(json.RawMessage(`{"customer":"Ada"}`), []*engine.Message{
		engine.NewTextMessage(engine.RoleUser, "my order is late"), engine.NewTextMessage(engine.RoleModel, "sorry to hear that")})
	require.NoError(t, err)
	got, err := json.Marshal(msgs)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"system","content":[{"text":"\nYou triage support requests for Ada. Use the refund tool when a refund is due.\n"}]},
		{"role":"user","content":[{"text":"my order is late"}],"metadata":{"purpose":"history"}},
		{"role":"model","content":[{"text":"sorry to hear that"}],"metadata":{"purpose":"history"}},
		{"role":"user","content":[{"text":"\nWhat should we do next?"}]}]`, string(got))
}

// TestFilePromptGeneratesWithItsFrontMatter runs /prompt/recipe.quick by key: the model gets the
// rendered message, the JSON output format with the schema, and the run's output holds the
// parsed JSON.
func TestFilePromptGeneratesWithItsFrontMatter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	writeFile(t, dir, "pantry.prompt", "---\nmodel: chef\nconfig:\n  temperature: 0.2\ntools: [lookupPantry]\nmaxTurns: 2\noutput:\n  schema:\n    title: string\n---\nCook with {{item}}.\n")
	m := scripted.Define(b.r, "chef", scripted.Reply(call("lookupPantry", "p1", map[string]any{"item": "eggs"})), scripted.Text(`{"title":"Omelette"}`))
	engine.DefineTool(b.r, "lookupPantry", "Says what is in the pantry.", func(tc *engine.ToolContext, in struct {
		Item string `json:"item"`
	}) (string, error) {
		return in.Item + ": 6", nil
	})
	_, err := engine.LoadPromptDir(b.r, dir)
	require.NoError(t, err)

	out, err := b.r.Run(context.Background(), "/prompt/pantry", json.RawMessage(`{"item":"eggs"}`), nil)
	require.NoError(t, err)
	var res struct {
		Output map[string]any `json:"output"`
		Text   string         `json:"text"`
	}
	require.NoError(t, json.Unmarshal(out, &res))
	require.Equal(t, map[string]any{"title": "Omelette"}, res.Output)

	reqs := m.Requests()
	require.Len(t, reqs, 2, "one tool turn, then the answer")
	first := reqs[0]
	require.Equal(t, "Cook with eggs.", first.Messages[0].Content[0].Text)
	require.Contains(t, first.Messages[0].Text(), "Output should be in JSON format", "Genkit's output instructions, for a model without constrained output")
	require.Equal(t, engine.RoleUser, first.Messages[0].Role)
	require.Equal(t, map[string]any{"temperature": 0.2}, first.Config)
	require.Len(t, first.Tools, 1)
	require.Equal(t, "lookupPantry", first.Tools[0].Name)
	require.Equal(t, "json", first.Output.Format)
	require.JSONEq(t, `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`, string(first.Output.Schema.Raw()))
}

// TestBrokenPromptFileIsAnErrorNamingFileAndLine loads a directory with a front matter and a
// template that do not parse, next to a good file: the good one loads, each broken one is listed
// with file:line and fails FAILED_PRECONDITION when run.
func TestBrokenPromptFileIsAnErrorNamingFileAndLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	writeFile(t, dir, "good.prompt", "---\nmodel: m\n---\nHello {{name}}.\n")
	writeFile(t, dir, "badyaml.prompt", "---\nmodel: m\ninput:\n  schema:\n    name: string\n   bad: [unclosed\n---\nHi\n")
	writeFile(t, dir, "badtemplate.prompt", "---\nmodel: m\n---\nline one\nline two {{#if x}}\nno close {{/each}}\n")

	_, err := engine.LoadPromptDir(b.r, dir)
	require.Error(t, err)
	var ferrs []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *engine.PromptFileError
		require.True(t, errors.As(e, &fe))
		ferrs = append(ferrs, fmt.Sprintf("%s:%d", filepath.Base(fe.File), fe.Line))
	}
	require.ElementsMatch(t, []string{"badyaml.prompt:6", "badtemplate.prompt:6"}, ferrs)

	require.NotNil(t, b.r.Lookup("/prompt/good"))
	bad := b.r.Lookup("/prompt/badyaml").Desc()
	loadErr, _ := bad.Metadata["prompt"].(map[string]any)[engine.MetaLoadError].(string)
	require.Contains(t, loadErr, filepath.Join(dir, "badyaml.prompt")+":6: front matter:")
	_, err = b.r.Run(context.Background(), "/prompt/badtemplate", json.RawMessage(`{}`), nil)
	require.Equal(t, engine.StatusFailedPrecondition, statusOf(t, err))
	require.Contains(t, err.Error(), "badtemplate.prompt:6")
}

// TestPromptDirReloadsChangedFiles changes, adds and removes files: Reload picks up each change
// and does nothing when nothing changed.
func TestPromptDirReloadsChangedFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	writeFile(t, dir, "greet.prompt", "---\nmodel: m\n---\nHello {{name}}.\n")
	d, err := engine.LoadPromptDir(b.r, dir)
	require.NoError(t, err)
	changed, err := d.Reload()
	require.NoError(t, err)
	require.False(t, changed)

	writeFile(t, dir, "greet.prompt", "---\nmodel: m\n---\nGood morning, {{name}}!\n")
	bump(t, filepath.Join(dir, "greet.prompt"))
	writeFile(t, dir, "bye.prompt", "Bye {{name}}.\n")
	changed, err = d.Reload()
	require.NoError(t, err)
	require.True(t, changed)
	msgs, err := b.r.Lookup("/prompt/greet").(*engine.FilePrompt).Render(json.RawMessage(`{"name":"Ada"}`), nil)
	require.NoError(t, err)
	require.Equal(t, "Good morning, Ada!", msgs[0].Text())
	require.NotNil(t, b.r.Lookup("/prompt/bye"))

	require.NoError(t, os.Remove(filepath.Join(dir, "bye.prompt")))
	changed, err = d.Reload()
	require.NoError(t, err)
	require.True(t, changed)
	require.Nil(t, b.r.Lookup("/prompt/bye"), "a removed file's prompt leaves the registry")
}

// TestFilePromptDoesNotReplaceACodePrompt: a file whose key a DefinePrompt holds is an error for
// that file, and the code's prompt stays.
func TestFilePromptDoesNotReplaceACodePrompt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code := engine.DefinePrompt(b.r, "greet", "", func(string) (string, error) { return "hi", nil }, engine.PromptConfig{})
	dir := t.TempDir()
	writeFile(t, dir, "greet.prompt", "Hello.\n")
	_, err := engine.LoadPromptDir(b.r, dir)
	require.ErrorContains(t, err, "/prompt/greet is already registered")
	require.Same(t, engine.Action(code), b.r.Lookup("/prompt/greet"))
}

func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// bump moves a file's modification time forward, so that a rewrite within the file system's
// time resolution is seen as a change even when its size is the same.
func bump(t *testing.T, path string) {
	t.Helper()
	later := time.Now().Add(2 * time.Second)
	require.NoError(t, os.Chtimes(path, later, later))
}

// BenchmarkLoadPromptDir500 loads a directory of 500 .prompt files (front matter with model,
// config, tools, Picoschema input and JSON output schema; roles, a partial and media in the
// template) into a fresh registry each iteration. Issue #30 asks for at most 1 s.
func BenchmarkLoadPromptDir500(b *testing.B) {
	dir := b.TempDir()
	writeFile(b, dir, "_style.prompt", "Answer in {{#if tone}}a {{tone}}{{else}}a friendly{{/if}} tone.\n")
	for i := range 500 {
		writeFile(b, dir, fmt.Sprintf("p%03d.prompt", i), fmt.Sprintf(`---
model: googleai/gemini-2.5-flash
description: Prompt number %d.
config:
  temperature: 0.4
input:
  schema:
    dish: string, the dish
    servings?: integer
    photoUrl: string
output:
  format: json
  schema:
    title: string
    ingredients(array): string
tools: [lookupPantry]
---
{{role "system"}}
You are chef %d. {{> style}}
{{role "user"}}
Make {{dish}} for {{servings}} people:
{{media url=photoUrl}}
`, i, i))
	}
	b.ReportAllocs()
	for b.Loop() {
		r := engine.NewRegistry()
		d, err := engine.LoadPromptDir(r, dir)
		if err != nil || len(r.List()) != 501 || d == nil {
			b.Fatalf("loaded %d actions: %v", len(r.List()), err)
		}
	}
}

// TestFilePromptAsAToolTransfersTheConversation: a model that calls a loaded prompt hands the
// conversation over, as with DefinePrompt: the next turn runs with the file's model, its rendered
// messages in front (tagged preamble) and its tools.
func TestFilePromptAsAToolTransfersTheConversation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	writeFile(t, dir, "billing.prompt", "---\nmodel: billing-model\ndescription: The billing desk.\ninput:\n  schema:\n    topic: string\ntools: [lookupBill]\n---\n{{role \"system\"}}\nYou are the billing desk.\n{{role \"user\"}}\nAbout {{topic}}.\n")
	_, err := engine.LoadPromptDir(b.r, dir)
	require.NoError(t, err)
	engine.DefineTool(b.r, "lookupBill", "Looks a bill up.", func(tc *engine.ToolContext, in struct{}) (string, error) { return "bill", nil })
	scripted.Define(b.r, "front", scripted.Reply(call("billing", "b1", map[string]any{"topic": "a double charge"})))
	billing := scripted.Define(b.r, "billing-model", scripted.Text("Billing here."))

	require.Equal(t, "The billing desk.", b.r.Lookup("/prompt/billing").(*engine.FilePrompt).Definition().Description)
	resp, err := engine.Generate(context.Background(), b.r, engine.WithModelName("front"), engine.WithPrompt("I was charged twice"), engine.WithToolNames("billing"))
	require.NoError(t, err)
	require.Equal(t, "Billing here.", resp.Text())
	reqs := billing.Requests()
	require.Len(t, reqs, 1)
	msgs := reqs[0].Messages
	require.Equal(t, engine.RoleSystem, msgs[0].Role)
	require.Equal(t, "\nYou are the billing desk.\n", msgs[0].Text())
	require.Equal(t, true, msgs[0].Metadata[engine.MetaPreamble])
	require.Equal(t, "\nAbout a double charge.", msgs[1].Text())
	require.Len(t, reqs[0].Tools, 1)
	require.Equal(t, "lookupBill", reqs[0].Tools[0].Name)
}
