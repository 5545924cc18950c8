package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/google/dotprompt/go/dotprompt"
	"go.opentelemetry.io/otel/attribute"
)

// FilePrompt is a prompt loaded from a Dotprompt (.prompt) file, as Genkit loads them: the front
// matter gives the model, config, tools, input schema (Picoschema or JSON Schema), output format
// and schema and maxTurns; the template renders into whole messages, with {{role}}, {{media}} and
// {{history}}. It is a /prompt/<name> action and, like Prompt, a tool that transfers the
// conversation.
type FilePrompt struct {
	r    *Registry
	desc ActionDesc
	def  ToolDefinition
	// file is the path the prompt was loaded from, for errors.
	file string
	// loadErr is set on the stand-in of a file that did not load: it lists with the error, and
	// running it is FAILED_PRECONDITION.
	loadErr *PromptFileError

	// mu serializes rendering: a compiled dotprompt function renders through its Dotprompt's
	// shared template.
	mu     sync.Mutex
	render dotprompt.PromptFunction
	// meta is the front matter, which each render takes its defaults and schemas from.
	meta dotprompt.PromptMetadata
	// opts are the generate's model, tools, config, tool choice, output and turn limit.
	opts GenerateActionOptions
}

// PromptFileError is a .prompt file that did not load, with the line the fault is on (1-based;
// 0 when the library names none).
type PromptFileError struct {
	File string
	Line int
	Err  error
}

func (e *PromptFileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *PromptFileError) Unwrap() error { return e.Err }

// MetaLoadError is the prompt metadata key of a file's load error ("file:line: message"), which
// catalogues show in place of the prompt.
const MetaLoadError = "loadError"

// Reserved keys of the front matter the generate takes from it (Genkit's LoadPromptFromSource).
const (
	frontToolChoice         = "toolChoice"
	frontReturnToolRequests = "returnToolRequests"
)

// yamlPosition finds goccy/go-yaml's "[line:column]" in an error message.
var yamlPosition = regexp.MustCompile(`\[(\d+):(\d+)\]`)

// templateLine finds the line of a Handlebars parse error.
var templateLine = regexp.MustCompile(`(?i)line (\d+)`)

// parsePromptFile compiles a .prompt file's source. name is the prompt's registered name (with
// its variant: "name.variant"), partials the directory's partials by name.
func parsePromptFile(r *Registry, file, name, source string, partials map[string]string) (*FilePrompt, error) {
	fail := func(line int, err error) (*FilePrompt, error) {
		return nil, &PromptFileError{File: file, Line: line, Err: err}
	}
	// The library prints a front matter it cannot parse and takes the whole file as the
	// template; Genkit would then send the YAML to the model. A file's YAML is checked here, to
	// say where it is wrong.
	if m := dotprompt.FrontmatterAndBodyRegex.FindStringSubmatch(source); m != nil {
		var front map[string]any
		if err := yaml.Unmarshal([]byte(m[1]), &front); err != nil {
			line := 1
			if p := yamlPosition.FindStringSubmatch(err.Error()); p != nil {
				n, _ := strconv.Atoi(p[1])
				line = n + 1 // the front matter starts after the opening "---"
			}
			msg, _, _ := strings.Cut(err.Error(), "\n")
			return fail(line, fmt.Errorf("front matter: %s", msg))
		}
	}
	dp := dotprompt.NewDotprompt(&dotprompt.DotpromptOptions{Partials: partials})
	parsed, err := dp.Parse(source)
	if err != nil {
		return fail(1, err)
	}
	meta, err := dp.RenderMetadata(parsed, &parsed.PromptMetadata)
	if err != nil {
		return fail(1, fmt.Errorf("front matter: %w", err))
	}
	// The template alone compiles: the front matter is parsed once, above, and given to each render.
	render, err := compilePrompt(dp, parsed.Template)
	if err != nil {
		line := 0
		if p := templateLine.FindStringSubmatch(err.Error()); p != nil {
			n, _ := strconv.Atoi(p[1])
			line = n + bodyOffset(source, parsed.Template)
		}
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return fail(line, fmt.Errorf("template: %s", msg))
	}

	base, variant, _ := strings.Cut(name, ".")
	p := &FilePrompt{r: r, file: file, render: render, meta: parsed.PromptMetadata}
	p.opts = GenerateActionOptions{Model: meta.Model, Tools: meta.Tools}
	if len(meta.Config) > 0 {
		p.opts.Config = map[string]any(meta.Config)
	}
	if meta.MaxTurns > 0 {
		p.opts.SetMaxTurns(meta.MaxTurns)
	}
	if tc, ok := meta.Raw[frontToolChoice].(string); ok {
		p.opts.ToolChoice = ToolChoice(tc)
	}
	if v, ok := meta.Raw[frontReturnToolRequests].(bool); ok {
		p.opts.ReturnToolRequests = v
	}
	in, _, err := frontSchema(meta.Input.Schema)
	if err != nil {
		return fail(1, fmt.Errorf("input schema: %w", err))
	}
	out, _, err := frontSchema(meta.Output.Schema)
	if err != nil {
		return fail(1, fmt.Errorf("output schema: %w", err))
	}
	if meta.Output.Format != "" || out != nil {
		format := meta.Output.Format
		if format == "" {
			format = "json" // a schema without a format is JSON, as in Genkit
		}
		p.opts.Output = &GenerateOutputOptions{Format: format, Schema: out, Constrained: true}
	}
	promptMeta := map[string]any{
		"name": base, "model": meta.Model, "tools": meta.Tools, "config": meta.Config,
		"template": parsed.Template, "file": file,
		"input":  map[string]any{"schema": in, "default": meta.Input.Default},
		"output": map[string]any{"format": meta.Output.Format, "schema": out},
	}
	if meta.MaxTurns > 0 {
		promptMeta["maxTurns"] = meta.MaxTurns
	}
	if variant != "" {
		promptMeta["variant"] = variant
	}
	p.desc = ActionDesc{
		Key: ActionKey(ActionTypePrompt, name), Name: name, Type: ActionTypePrompt,
		Description: meta.Description, InputSchema: in, Metadata: map[string]any{"prompt": promptMeta},
	}
	p.def = *toToolDefinition(&ToolDefinition{Name: name, Description: meta.Description, InputSchema: in})
	return p, nil
}

// compilePrompt compiles a prompt's template; Handlebars reports a syntax error by panicking,
// which the library does not always recover.
func compilePrompt(dp *dotprompt.Dotprompt, source string) (fn dotprompt.PromptFunction, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	return dp.Compile(source, nil)
}

// bodyOffset is the number of lines in front of the template body in source.
func bodyOffset(source, template string) int {
	if template == "" {
		return 0
	}
	first, _, _ := strings.Cut(template, "\n")
	i := strings.Index(source, first)
	if i < 0 {
		return 0
	}
	if m := dotprompt.FrontmatterAndBodyRegex.FindStringSubmatchIndex(source); m != nil && i < m[4] {
		if j := strings.Index(source[m[4]:], first); j >= 0 {
			i = m[4] + j
		}
	}
	return strings.Count(source[:i], "\n")
}

// frontSchema turns a rendered front-matter schema (the library gives Picoschema as an
// invopop schema, JSON Schema as a map) into a compiled Schema; ok is false for none.
func frontSchema(v any) (s *Schema, ok bool, err error) {
	if v == nil {
		return nil, false, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, false, err
	}
	if string(raw) == "null" || string(raw) == "true" || string(raw) == "{}" {
		return nil, false, nil
	}
	s, err = NewSchema(json.RawMessage(raw))
	return s, err == nil, err
}

// brokenPrompt is the stand-in of a file that did not load.
func brokenPrompt(r *Registry, name string, ferr *PromptFileError) *FilePrompt {
	base, _, _ := strings.Cut(name, ".")
	p := &FilePrompt{r: r, file: ferr.File, loadErr: ferr}
	p.desc = ActionDesc{
		Key: ActionKey(ActionTypePrompt, name), Name: name, Type: ActionTypePrompt,
		Description: ferr.Error(),
		Metadata:    map[string]any{"prompt": map[string]any{"name": base, "file": ferr.File, MetaLoadError: ferr.Error()}},
	}
	p.def = *toToolDefinition(&ToolDefinition{Name: name, Description: ferr.Error()})
	return p
}

// Desc implements Action.
func (p *FilePrompt) Desc() *ActionDesc { return &p.desc }

// Name implements Tool.
func (p *FilePrompt) Name() string { return p.desc.Name }

// Definition implements Tool: the model is told the prompt's name, description and input schema.
func (p *FilePrompt) Definition() *ToolDefinition { return &p.def }

// File is the path the prompt was loaded from.
func (p *FilePrompt) File() string { return p.file }

// Options are what the prompt generates with, from its front matter: model, config, tools, tool
// choice, output and turn limit; the messages are left out (Render gives them).
func (p *FilePrompt) Options() GenerateActionOptions {
	o := p.opts
	o.Tools = slices.Clone(p.opts.Tools)
	o.Config = cloneConfig(p.opts.Config)
	if p.opts.Output != nil {
		out := *p.opts.Output
		o.Output = &out
	}
	return o
}

// cloneConfig copies a front matter's config map one level deep; other values are kept as they are.
func cloneConfig(v any) any {
	if m, ok := v.(map[string]any); ok {
		return maps.Clone(m)
	}
	return v
}

// LoadError is the error of a file that did not load, or nil.
func (p *FilePrompt) LoadError() error {
	if p.loadErr == nil {
		return nil
	}
	return p.loadErr
}

// RunTool implements Tool: a prompt called by a model is a transfer, which the generate loop
// handles itself.
func (p *FilePrompt) RunTool(*ToolContext, json.RawMessage) (*ToolOutput, error) {
	return nil, Errorf(StatusFailedPrecondition, "prompt %s: a prompt used as a tool transfers the conversation; it runs only inside generate", p.desc.Name)
}

// Render renders the prompt's messages for input (a JSON object, or empty for the front
// matter's defaults). history fills {{history}}, or goes before the last user message when the
// template has none, as Dotprompt does.
func (p *FilePrompt) Render(input json.RawMessage, history []*Message) ([]*Message, error) {
	if p.loadErr != nil {
		return nil, Errorf(StatusFailedPrecondition, "prompt %s did not load: %v", p.desc.Name, p.loadErr)
	}
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}") // no input: the front matter's defaults, as in Genkit
	}
	if err := p.desc.InputSchema.ValidateJSON(input); err != nil {
		return nil, Errorf(StatusInvalidArgument, "prompt %s input: %w", p.desc.Name, err)
	}
	var vars map[string]any
	if err := json.Unmarshal(input, &vars); err != nil {
		return nil, Errorf(StatusInvalidArgument, "prompt %s: input must be a JSON object: %w", p.desc.Name, err)
	}
	data := &dotprompt.DataArgument{Input: vars}
	for _, m := range history {
		dm, err := toDotpromptMessage(m)
		if err != nil {
			return nil, Errorf(StatusInvalidArgument, "prompt %s history: %w", p.desc.Name, err)
		}
		data.Messages = append(data.Messages, dm)
	}
	p.mu.Lock()
	rendered, err := p.render(data, &p.meta)
	p.mu.Unlock()
	if err != nil {
		return nil, Errorf(StatusInvalidArgument, "prompt %s: render: %w", p.desc.Name, err)
	}
	msgs := make([]*Message, 0, len(rendered.Messages))
	for _, m := range rendered.Messages {
		msg, err := fromDotpromptMessage(m)
		if err != nil {
			return nil, Errorf(StatusInvalidArgument, "prompt %s: %w", p.desc.Name, err)
		}
		if len(msg.Content) > 0 {
			msgs = append(msgs, msg)
		}
	}
	return msgs, nil
}

// fromDotpromptMessage converts a rendered message; text and media parts as Genkit converts them,
// and the parts of a history message as they were.
func fromDotpromptMessage(m dotprompt.Message) (*Message, error) {
	out := &Message{Role: Role(m.Role)}
	if len(m.Metadata) > 0 {
		out.Metadata = map[string]any(m.Metadata)
	}
	for _, part := range m.Content {
		switch v := part.(type) {
		case *dotprompt.TextPart:
			if v.Text != "" {
				out.Content = append(out.Content, NewTextPart(v.Text))
			}
		case *dotprompt.MediaPart:
			ct, err := mediaContentType(v.Media.ContentType, v.Media.URL)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, NewMediaPart(ct, v.Media.URL))
		default:
			// History parts (tool requests, responses, data) were converted from ours.
			raw, err := json.Marshal(part)
			if err != nil {
				return nil, err
			}
			var p Part
			if err := json.Unmarshal(raw, &p); err != nil {
				return nil, fmt.Errorf("convert a %T part: %w", part, err)
			}
			out.Content = append(out.Content, &p)
		}
	}
	return out, nil
}

// mediaContentType is Genkit Go's contentType: a data: URL gives its own; a gs:// or http(s) URL
// needs one given.
func mediaContentType(ct, url string) (string, error) {
	if url == "" {
		return "", errors.New("a media part has no url")
	}
	if ct != "" {
		return ct, nil
	}
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		prefix, _, found := strings.Cut(rest, ",")
		if !found {
			return "", errors.New("media data: URL without a comma")
		}
		prefix = strings.TrimSuffix(prefix, ";base64")
		return prefix, nil
	}
	return "", nil // Genkit JS leaves it to the model; so does Loupe
}

// toDotpromptMessage converts a history message for the template.
func toDotpromptMessage(m *Message) (dotprompt.Message, error) {
	out := dotprompt.Message{Role: dotprompt.Role(m.Role)}
	out.Metadata = dotprompt.Metadata(m.Metadata)
	for _, p := range m.Content {
		switch {
		case p.IsText():
			out.Content = append(out.Content, &dotprompt.TextPart{Text: p.Text})
		case p.Media != nil:
			out.Content = append(out.Content, &dotprompt.MediaPart{Media: dotprompt.Media{URL: p.Media.URL, ContentType: p.Media.ContentType}})
		default:
			raw, err := json.Marshal(p)
			if err != nil {
				return out, err
			}
			out.Content = append(out.Content, historyPart(raw))
		}
	}
	return out, nil
}

// historyPart carries a part of ours through the template's history as its JSON.
type historyPart json.RawMessage

func (historyPart) GetMetadata() dotprompt.Metadata { return nil }

func (h historyPart) MarshalJSON() ([]byte, error) { return h, nil }

// requestOptions are the generate's serializable options: the rendered messages, then the front
// matter's model, tools, config and output.
func (p *FilePrompt) requestOptions(input json.RawMessage, history []*Message) (*GenerateActionOptions, error) {
	msgs, err := p.Render(input, history)
	if err != nil {
		return nil, err
	}
	o := p.opts
	o.Tools = append([]string(nil), p.opts.Tools...)
	if p.opts.Output != nil {
		out := *p.opts.Output
		o.Output = &out
	}
	o.Messages = msgs
	return &o, nil
}

// Generate renders the prompt with input and generates with it, in a prompt span; history fills
// {{history}}; opts come after the prompt's own.
func (p *FilePrompt) Generate(ctx context.Context, input json.RawMessage, history []*Message, opts ...GenerateOption) (*ModelResponse, error) {
	ctx, span := p.r.startSpan(ctx, p.desc.Name, "action", "prompt", attribute.String(AttrGenAIOp, "invoke_agent"))
	p.r.setJSONAttr(span, AttrInput, input)
	req, err := p.requestOptions(input, history)
	if err != nil {
		p.r.endSpan(span, err)
		return nil, err
	}
	resp, err := Generate(ctx, p.r, append([]GenerateOption{WithActionOptions(req)}, opts...)...)
	if err == nil {
		p.r.setJSONAttr(span, AttrOutput, resp.Text())
	}
	p.r.endSpan(span, err)
	return resp, err
}

// RunJSON implements Action, as Prompt's: the output is the response's message, finish reason,
// usage and text, and for JSON output the parsed output.
func (p *FilePrompt) RunJSON(ctx context.Context, input json.RawMessage, _ StreamFunc) (json.RawMessage, error) {
	return p.RunStreaming(ctx, input, nil)
}

// RunStreaming is RunJSON with the model's chunks given to cb as they come (nil for none), as a
// prompt playground shows them.
func (p *FilePrompt) RunStreaming(ctx context.Context, input json.RawMessage, cb ModelStreamFunc) (json.RawMessage, error) {
	var opts []GenerateOption
	if cb != nil {
		opts = append(opts, WithStreaming(cb))
	}
	resp, err := p.Generate(ctx, input, nil, opts...)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"message": resp.Message, "finishReason": resp.FinishReason, "usage": resp.Usage, "text": resp.Text()}
	if p.opts.Output != nil && p.opts.Output.Format == "json" {
		var v any
		if resp.Output(&v) == nil {
			out["output"] = v
		}
	}
	return json.Marshal(out)
}

// preamble implements transferTool: a model calling the prompt gets its rendered messages and its
// model, tools and config.
func (p *FilePrompt) preamble(input json.RawMessage) (*GenerateActionOptions, error) {
	msgs, err := p.Render(input, nil)
	if err != nil {
		return nil, err
	}
	pre := p.transferOptions()
	pre.Messages = msgs
	return pre, nil
}

// transferOptions implements transferTool.
func (p *FilePrompt) transferOptions() *GenerateActionOptions {
	return &GenerateActionOptions{Model: p.opts.Model, Tools: p.opts.Tools, ToolChoice: p.opts.ToolChoice, Config: p.opts.Config}
}
