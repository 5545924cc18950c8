package genkitapp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/trace"
)

// An app's action is known to Loupe as the app's name, a colon and Genkit's key:
// "compat-js:/flow/weatherFlow". Two apps may both have /flow/chat, and every app has
// /util/generate; the name keeps them apart in the catalogue, the runs and the API.

// Key is the key Loupe gives the action genkitKey of the app.
func Key(app, genkitKey string) string { return app + ":" + genkitKey }

// SplitKey splits a key made by Key; ok is false for any other key.
func SplitKey(key string) (app, genkitKey string, ok bool) {
	i := strings.Index(key, ":/")
	if i <= 0 {
		return "", "", false
	}
	return key[:i], key[i+1:], true
}

// MetaApp is the action description's metadata field naming the Genkit app it belongs to.
const MetaApp = "loupe:genkitApp"

// metaGenerate is the metadata field of an interrupted model message, recorded from a flow's
// response, that keeps the generate's model, tools and config: resuming the flow's generate
// needs them, and the flow's run keeps nothing else of them. It is taken off before the
// history goes back to the app.
const metaGenerate = "loupe:genkitGenerate"

// Action keys of Genkit's that the proxies treat apart.
const (
	generateKey         = "/util/generate"
	promptPrefix        = "/prompt/"
	executablePrefix    = "/executable-prompt/"
	finishedInterrupted = "interrupted"
)

// conn is what the proxies of one app share: its client, the runtime it was made for, and its
// actions.
type conn struct {
	name    string
	client  *Client
	runtime *Runtime
	actions map[string]*RemoteAction
	// defaultModel is the app's default model (genkit({model})), for a flow's response that
	// names none.
	defaultModel string
	// goApp is a Genkit Go app (its runtime's genkitVersion is go/…), which checks a
	// resume.respond's output against the tool's output schema, a denial's too.
	goApp bool
	// log is nil in tests that build a conn by hand.
	log *slog.Logger
}

// proxy is an engine action that runs an app's action through its reflection API.
type proxy struct {
	c      *conn
	remote *RemoteAction
	desc   *engine.ActionDesc
}

func (p *proxy) Desc() *engine.ActionDesc { return p.desc }

// RunJSON runs the action in the app. A generate (/util/generate), a prompt (/prompt/X: rendered
// by /executable-prompt/X, then generated) or a flow whose output is a generate response that ended
// interrupted stops the run for reviewers; run again with their decisions, it resumes through
// the app's /util/generate.
func (p *proxy) RunJSON(ctx context.Context, input json.RawMessage, cb engine.StreamFunc) (json.RawMessage, error) {
	ext := runs.ExternalFrom(ctx)
	key := p.remote.Key
	switch {
	case key == generateKey:
		opts, err := decodeOptions(input)
		if err != nil {
			return nil, err
		}
		return p.c.generate(ctx, ext, opts, cb, false)
	case strings.HasPrefix(key, promptPrefix) && p.c.actions[executablePrefix+strings.TrimPrefix(key, promptPrefix)] != nil:
		// The render is not the run's trace (nil: no run labels): the generate is.
		rendered, err := p.c.call(ctx, nil, executablePrefix+strings.TrimPrefix(key, promptPrefix), input, nil)
		if err != nil {
			return nil, err
		}
		opts, err := decodeOptions(rendered)
		if err != nil {
			return nil, fmt.Errorf("render prompt %s: %w", key, err)
		}
		return p.c.generate(ctx, ext, opts, cb, false)
	}
	if ext != nil && len(ext.History()) > 0 {
		// A flow that returned its interrupted generate response: its generate goes on in the
		// app's /util/generate, with what the flow's response said of it.
		opts, err := storedOptions(ext.History())
		if err != nil {
			return nil, err
		}
		return p.c.generate(ctx, ext, opts, cb, true)
	}
	out, err := p.c.call(ctx, ext, key, input, cb)
	if err != nil || ext == nil {
		return out, asInterrupted(key, err)
	}
	if opts, resp, ok := p.c.interruptedFlow(out); ok {
		return out, p.c.record(ext, opts, resp, true)
	}
	if err := p.c.unresumable(key, out); err != nil {
		if p.c.log != nil {
			p.c.log.Warn("a flow's output is interrupted, and Loupe cannot resume it", "run", ext.RunID(), "action", key, "missing", err.Missing, "err", err)
		}
		return out, err
	}
	return out, nil
}

// call runs an action of the app, streaming its chunks to cb, and links the run to its trace.
func (c *conn) call(ctx context.Context, ext *runs.External, key string, input json.RawMessage, cb engine.StreamFunc) (json.RawMessage, error) {
	// The caller's action context (a run's, or runAction's) goes to the app as Genkit's own.
	req := RunRequest{Key: key, Input: input, Context: engine.ActionContextFrom(ctx)}
	if ext != nil {
		// The app's root span carries the run's id, so that every execution's trace (the first,
		// and each resume's) is found as the run's.
		req.TelemetryLabels = map[string]string{trace.AttrRunID: ext.RunID()}
		// Genkit Go's root spans take no labels: the trace id the app names links the execution.
		req.OnTraceID = ext.SetTraceID
	}
	var onChunk func(json.RawMessage) error
	if cb != nil {
		onChunk = func(chunk json.RawMessage) error { return cb(ctx, chunk) }
	}
	// The app at the address must still be this runtime: once it died, another Genkit app (they
	// take the first free port from 3100) may answer there, and must not be sent this run.
	if err := health(ctx, c.client, c.runtime); err != nil {
		return nil, fmt.Errorf("%w: app %s (runtime %s) is not at %s: %w", runs.ErrUnreachable, c.name, c.runtime.ID, c.client.BaseURL, err)
	}
	res, err := c.client.RunAction(ctx, req, onChunk)
	if ext != nil {
		if res != nil && res.TraceID != "" {
			ext.SetTraceID(res.TraceID)
		} else if ae, ok := err.(*ActionError); ok && ae.TraceID != "" {
			ext.SetTraceID(ae.TraceID)
		}
	}
	if err != nil {
		return nil, err
	}
	return res.Result, nil
}

// options is Genkit's GenerateActionOptions, the input of /util/generate, kept as its JSON
// fields so that whatever this Loupe does not know goes back to the app unchanged.
type options map[string]json.RawMessage

func decodeOptions(raw json.RawMessage) (options, error) {
	var o options
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, &engine.Error{Status: engine.StatusInvalidArgument, Message: "generate options must be a JSON object"}
	}
	return o, nil
}

func (o options) messages() ([]*engine.Message, error) {
	var msgs []*engine.Message
	if raw, ok := o["messages"]; ok {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return nil, fmt.Errorf("decode the generate's messages: %w", err)
		}
	}
	return msgs, nil
}

func (o options) model() string {
	var m string
	if json.Unmarshal(o["model"], &m) != nil {
		var ref struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(o["model"], &ref)
		m = ref.Name
	}
	return m
}

func (o options) toolKeys() []string {
	var keys []string
	var list []json.RawMessage
	_ = json.Unmarshal(o["tools"], &list)
	for _, raw := range list {
		var k string
		if json.Unmarshal(raw, &k) == nil {
			keys = append(keys, k)
			continue
		}
		var ref struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &ref) == nil && ref.Name != "" {
			keys = append(keys, ref.Name)
		}
	}
	return keys
}

// response is the part of Genkit's GenerateResponse the proxies read.
type response struct {
	Message       *engine.Message `json:"message"`
	FinishReason  string          `json:"finishReason"`
	FinishMessage string          `json:"finishMessage,omitempty"`
	Usage         *engine.Usage   `json:"usage,omitempty"`
	Request       *struct {
		Messages []*engine.Message `json:"messages"`
		Tools    []struct {
			Name string `json:"name"`
			Key  string `json:"key"`
		} `json:"tools"`
		Config json.RawMessage `json:"config,omitempty"`
		Output json.RawMessage `json:"output,omitempty"`
	} `json:"request,omitempty"`
	// Model is not Genkit's: a flow may add it to the response it returns, for its resume.
	Model string `json:"model,omitempty"`
}

func (r *response) engine() *engine.ModelResponse {
	return &engine.ModelResponse{Message: r.Message, FinishReason: engine.FinishReason(r.FinishReason),
		FinishMessage: r.FinishMessage, Usage: r.Usage}
}

// generate runs the app's /util/generate with opts, resuming it with the reviewers' decisions
// when the run has a recorded history, and records its conversation and outcome in the run.
func (c *conn) generate(ctx context.Context, ext *runs.External, opts options, cb engine.StreamFunc, fromFlow bool) (json.RawMessage, error) {
	if ext != nil && len(ext.History()) > 0 {
		history := stripped(ext.History())
		respond, restart := ext.Resume()
		if c.goApp {
			history = pendingDenials(history, respond)
		}
		raw, err := json.Marshal(history)
		if err != nil {
			return nil, err
		}
		opts["messages"] = raw
		resume := map[string]any{}
		if len(respond) > 0 {
			resume["respond"] = respond
		}
		if len(restart) > 0 {
			resume["restart"] = restart
		}
		if len(resume) > 0 {
			if opts["resume"], err = json.Marshal(resume); err != nil {
				return nil, err
			}
		}
	}
	if gated, err := c.gating(ctx, ext, opts); err != nil {
		return nil, err
	} else if gated {
		return c.generateGated(ctx, ext, opts, cb, fromFlow)
	}
	input, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	out, err := c.call(ctx, ext, generateKey, input, cb)
	if err != nil || ext == nil {
		return out, err
	}
	var resp response
	if err := json.Unmarshal(out, &resp); err != nil || resp.Message == nil {
		return out, nil // not a generate response after all: the run's output as it is
	}
	return out, c.record(ext, opts, &resp, fromFlow)
}

// record hands a generate's conversation and response to the run. A flow's interrupted model
// message keeps the generate's options for the resume.
func (c *conn) record(ext *runs.External, opts options, resp *response, fromFlow bool) error {
	var msgs []*engine.Message
	if resp.Request != nil && len(resp.Request.Messages) > 0 {
		msgs = resp.Request.Messages
	} else {
		var err error
		if msgs, err = opts.messages(); err != nil {
			return err
		}
	}
	r := resp.engine()
	if fromFlow && r.FinishReason == engine.FinishReasonInterrupted {
		keep := options{}
		for k, v := range opts {
			if k != "messages" && k != "resume" {
				keep[k] = v
			}
		}
		m := *r.Message
		m.Metadata = map[string]any{}
		for k, v := range r.Message.Metadata {
			m.Metadata[k] = v
		}
		m.Metadata[metaGenerate] = keep
		r.Message = &m
	}
	return ext.RecordGenerate(runs.ExternalGenerate{Messages: msgs, Response: r, Model: opts.model(), Tools: c.toolSchemas(opts.toolKeys())})
}

// interruptedFlow reads a flow's output as a generate response that ended interrupted, and the
// options its generate can be resumed with: the model (the response's own "model" field, else the
// app's default), the tools and the config of its request. ok is false for any other output, and
// for a response whose model is unknown, which then is the run's output as it is.
func (c *conn) interruptedFlow(out json.RawMessage) (options, *response, bool) {
	var resp response
	if json.Unmarshal(out, &resp) != nil || resp.FinishReason != finishedInterrupted || resp.Message == nil || resp.Request == nil {
		return nil, nil, false
	}
	if len(resp.engine().Interrupts()) == 0 {
		return nil, nil, false
	}
	model := resp.Model
	if model == "" {
		model = c.defaultModel
	}
	if model == "" {
		return nil, nil, false
	}
	opts := options{}
	opts["model"], _ = json.Marshal(model)
	var tools []string
	for _, t := range resp.Request.Tools {
		if t.Key != "" {
			tools = append(tools, t.Key)
		} else {
			tools = append(tools, t.Name)
		}
	}
	if len(tools) > 0 {
		opts["tools"], _ = json.Marshal(tools)
	}
	if len(resp.Request.Config) > 0 && string(resp.Request.Config) != "null" {
		opts["config"] = resp.Request.Config
	}
	if len(resp.Request.Output) > 0 && string(resp.Request.Output) != "null" && string(resp.Request.Output) != "{}" {
		opts["output"] = resp.Request.Output
	}
	return opts, &resp, true
}

// storedOptions are the generate options recorded on a flow's interrupted model message.
func storedOptions(history []*engine.Message) (options, error) {
	last := history[len(history)-1]
	raw, err := json.Marshal(last.Metadata[metaGenerate])
	if err != nil || last.Metadata[metaGenerate] == nil {
		return nil, fmt.Errorf("resume: the interrupted message keeps no generate options, so the flow's generate cannot be resumed")
	}
	return decodeOptions(raw)
}

// pendingDenials gives each denied call of the history's last (interrupted) message its denial
// as metadata.pendingOutput, which Genkit Go's resume takes as the tool's answer before it looks
// at resume.respond: Genkit Go checks a respond's output against the tool's output schema, which a
// denial ({denied, by, reason, message}) seldom fits, and would fail the resumed generate. The
// respond entry stays, so the resume has something to resume; Genkit Go leaves it unused.
func pendingDenials(history []*engine.Message, respond []*engine.Part) []*engine.Message {
	if len(history) == 0 {
		return history
	}
	denied := map[[2]string]any{}
	for _, p := range respond {
		if d, _ := p.Metadata[engine.MetaDenied].(bool); d && p.ToolResponse != nil {
			denied[[2]string{p.ToolResponse.Name, p.ToolResponse.Ref}] = p.ToolResponse.Output
		}
	}
	if len(denied) == 0 {
		return history
	}
	last := *history[len(history)-1]
	last.Content = make([]*engine.Part, len(history[len(history)-1].Content))
	for i, p := range history[len(history)-1].Content {
		last.Content[i] = p
		if p.ToolRequest == nil {
			continue
		}
		out, ok := denied[[2]string{p.ToolRequest.Name, p.ToolRequest.Ref}]
		if !ok {
			continue
		}
		cp := *p
		cp.Metadata = map[string]any{}
		for k, v := range p.Metadata {
			cp.Metadata[k] = v
		}
		cp.Metadata["pendingOutput"] = out
		last.Content[i] = &cp
	}
	out := append([]*engine.Message(nil), history[:len(history)-1]...)
	return append(out, &last)
}

// stripped is the history without Loupe's own metadata, as the app gets it back.
func stripped(history []*engine.Message) []*engine.Message {
	out := make([]*engine.Message, len(history))
	for i, m := range history {
		if _, ok := m.Metadata[metaGenerate]; !ok {
			out[i] = m
			continue
		}
		cp := *m
		cp.Metadata = map[string]any{}
		for k, v := range m.Metadata {
			if k != metaGenerate {
				cp.Metadata[k] = v
			}
		}
		if len(cp.Metadata) == 0 {
			cp.Metadata = nil
		}
		out[i] = &cp
	}
	return out
}

// toolSchemas are the schemas of the tools named by keys (/tool/x or a bare name), by the short
// name a model's tool request uses.
func (c *conn) toolSchemas(keys []string) map[string]runs.ToolSchemas {
	out := map[string]runs.ToolSchemas{}
	for _, k := range keys {
		for _, cand := range []string{k, "/tool/" + k, "/tool.v2/" + k, "/prompt/" + k} {
			a := c.actions[cand]
			if a == nil {
				continue
			}
			out[shortName(a.Key)] = runs.ToolSchemas{Input: a.InputSchema, Output: toolOutputSchema(a)}
			break
		}
	}
	return out
}

func shortName(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// descs builds the proxies' descriptions from the app's actions. A schema Loupe cannot compile is
// left out (the app still checks its input).
func (c *conn) proxies() []*proxy {
	keys := make([]string, 0, len(c.actions))
	for k := range c.actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*proxy, 0, len(keys))
	for _, k := range keys {
		a := c.actions[k]
		typ, name := splitGenkitKey(k)
		// Genkit's metadata comes along (a tool's restartable=false, a prompt's template), with
		// the app's name and the action's key in the app.
		md := map[string]any{}
		for mk, mv := range a.Metadata {
			md[mk] = mv
		}
		md[MetaApp], md["genkit:key"], md[runs.MetaExternal] = c.name, k, true
		if typ == evaluatorType {
			// Any process on the database scores an experiment with the app's evaluator by
			// calling the app directly (evaluators.go).
			md[MetaURL] = c.client.BaseURL
		}
		d := &engine.ActionDesc{Key: Key(c.name, k), Name: name, Type: engine.ActionType(typ), Description: a.Description, Metadata: md}
		if a.Name != "" {
			d.Name = a.Name
		}
		d.InputSchema = compile(a.InputSchema)
		d.OutputSchema = compile(a.OutputSchema)
		if strings.HasPrefix(k, promptPrefix) && c.actions[executablePrefix+strings.TrimPrefix(k, promptPrefix)] != nil {
			d.Metadata["loupe:runs"] = "renders the prompt, then generates with it in the app (resumable)"
			if g := c.actions[generateKey]; g != nil {
				d.OutputSchema = compile(g.OutputSchema)
			}
		}
		out = append(out, &proxy{c: c, remote: a, desc: d})
	}
	return out
}

func splitGenkitKey(k string) (typ, name string) {
	s := strings.TrimPrefix(k, "/")
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

func compile(raw json.RawMessage) *engine.Schema {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	s, err := engine.NewSchema(raw)
	if err != nil {
		return nil
	}
	return s
}
