package ai

import (
	"context"
	"fmt"
	"reflect"
	"sync"
)

// GenerateOption configures a generate call: one of the With functions, or your own.
type GenerateOption func(*GenerateOptions)

// GenerateOptions is what the options of a generate call set. Each option sets its own fields;
// an option given later sets a field again, and options that add (messages, documents, tools,
// parts, middleware) add to what earlier ones added.
type GenerateOptions struct {
	// Model is the model to call: a Model, or the name of a registered one (WithModelName), or a
	// ModelRef. Without one, the app's default model is called.
	Model ModelArg
	// Config is the model configuration (temperature, max output tokens, …).
	Config any
	// System is the system instruction, the conversation's first message.
	System string
	// Messages are the conversation so far.
	Messages []*Message
	// Prompt is the user's message, after Messages.
	Prompt []*Part
	// Docs are documents given to the model as context.
	Docs []*Document
	// Tools are the tools the model may call: Tool values, or registered tools by name (ToolName).
	Tools []ToolRef
	// ToolChoice says whether the model may, must or must not call tools.
	ToolChoice ToolChoice
	// MaxTurns is the turn limit: how many times tools may run before the generate gives up with
	// ABORTED; nil means DefaultMaxTurns.
	MaxTurns *int
	// ReturnToolRequests stops at the model's tool requests instead of running them.
	ReturnToolRequests bool
	// Output asks for an output format, and for JSON a schema the answer is checked against.
	Output *GenerateOutputOptions
	// ToolResponses and ToolRestarts resume an interrupted generate whose history (Messages) ends
	// with the interrupted model message: answers given in place of tools, and calls run again.
	ToolResponses, ToolRestarts []*Part
	// Stream receives the chunks as they come.
	Stream ModelStreamCallback
	// Middleware wraps each turn, model call and tool execution.
	Middleware []*Middleware
}

// modelName names a registered model.
type modelName string

func (n modelName) Name() string { return string(n) }

// WithModel calls model: a Model, or a ModelRef to a registered one. A ModelRef's configuration is
// used unless WithConfig gives one.
func WithModel(model ModelArg) GenerateOption {
	return func(o *GenerateOptions) { o.Model = model }
}

// WithModelName calls the registered model of that name ("openai/gpt-4o-mini") or key.
func WithModelName(name string) GenerateOption {
	return func(o *GenerateOptions) { o.Model = modelName(name) }
}

// WithConfig passes model configuration (temperature, max output tokens, …).
func WithConfig(config any) GenerateOption {
	return func(o *GenerateOptions) { o.Config = config }
}

// WithSystem sets the system instruction; with args, text is a format for fmt.Sprintf.
func WithSystem(text string, args ...any) GenerateOption {
	return func(o *GenerateOptions) { o.System = format(text, args) }
}

// WithPrompt adds the user's message; with args, text is a format for fmt.Sprintf.
func WithPrompt(text string, args ...any) GenerateOption {
	return func(o *GenerateOptions) { o.Prompt = append(o.Prompt, NewTextPart(format(text, args))) }
}

// WithPromptParts adds a user's message made of parts (text and media, say).
func WithPromptParts(parts ...*Part) GenerateOption {
	return func(o *GenerateOptions) { o.Prompt = append(o.Prompt, parts...) }
}

func format(text string, args []any) string {
	if len(args) == 0 {
		return text
	}
	return fmt.Sprintf(text, args...)
}

// WithMessages starts from a conversation (the History of an earlier response, say).
func WithMessages(messages ...*Message) GenerateOption {
	return func(o *GenerateOptions) { o.Messages = append(o.Messages, messages...) }
}

// WithDocs gives the model documents as context.
func WithDocs(docs ...*Document) GenerateOption {
	return func(o *GenerateOptions) { o.Docs = append(o.Docs, docs...) }
}

// WithTextDocs gives the model documents of one text part each.
func WithTextDocs(texts ...string) GenerateOption {
	return func(o *GenerateOptions) {
		for _, t := range texts {
			o.Docs = append(o.Docs, DocumentFromText(t, nil))
		}
	}
}

// WithTools gives the model tools: Tool values, or registered tools by name (ToolName).
func WithTools(tools ...ToolRef) GenerateOption {
	return func(o *GenerateOptions) { o.Tools = append(o.Tools, tools...) }
}

// WithToolChoice tells the model whether it may (auto), must (required) or must not (none) call
// tools.
func WithToolChoice(choice ToolChoice) GenerateOption {
	return func(o *GenerateOptions) { o.ToolChoice = choice }
}

// WithMaxTurns sets the turn limit: how many times tools may run before the generate gives up with
// ABORTED (DefaultMaxTurns, 5, without it). 0 allows no tool turn: the first tool request is
// ABORTED, as Genkit's maxTurns is.
func WithMaxTurns(n int) GenerateOption {
	return func(o *GenerateOptions) { o.MaxTurns = &n }
}

// WithReturnToolRequests stops at the model's tool requests instead of running them.
func WithReturnToolRequests(returnRequests bool) GenerateOption {
	return func(o *GenerateOptions) { o.ReturnToolRequests = returnRequests }
}

func (o *GenerateOptions) output() *GenerateOutputOptions {
	if o.Output == nil {
		o.Output = &GenerateOutputOptions{}
	}
	return o.Output
}

var typeSchemas sync.Map // reflect.Type -> *Schema

// WithOutputType asks for JSON output shaped as output, a value of the Go type wanted
// (WithOutputType(Recipe{})): the type's schema goes to the model, the answer is checked against
// it, and ModelResponse.Output decodes it. The schema is derived and compiled once per type.
func WithOutputType(output any) GenerateOption {
	t := reflect.TypeOf(output)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, ok := typeSchemas.Load(t)
	if !ok && t != nil {
		cs, _, err := SchemaForType(t) // nil for an unconstrained type: any JSON output
		if err != nil {
			panic(NewError(StatusInvalidArgument, "output type %s: %w", t, err))
		}
		s, _ = typeSchemas.LoadOrStore(t, cs)
	}
	schema, _ := s.(*Schema)
	return func(o *GenerateOptions) {
		out := o.output()
		out.Schema = schema
		if out.Format == "" {
			out.Format = "json"
		}
	}
}

// WithOutputSchema asks for JSON output that conforms to schema (a map, JSON text or bytes, or a
// *Schema). It panics on a schema that does not compile.
func WithOutputSchema(schema any) GenerateOption {
	s, err := NewSchema(schema)
	if err != nil {
		panic(NewError(StatusInvalidArgument, "output schema: %w", err))
	}
	return func(o *GenerateOptions) {
		out := o.output()
		out.Schema = s
		if out.Format == "" {
			out.Format = "json"
		}
	}
}

// WithOutputFormat asks for an output format: "text" (the default) or "json".
func WithOutputFormat(format string) GenerateOption {
	return func(o *GenerateOptions) { o.output().Format = format }
}

// WithOutputInstructions replaces the instructions that tell the model the output format; ""
// keeps the default ones.
func WithOutputInstructions(instructions string) GenerateOption {
	return func(o *GenerateOptions) {
		if instructions != "" {
			o.output().Instructions = instructions
		}
	}
}

// WithStreaming streams the chunks of every turn to cb as they come. An error from cb ends the
// generate.
func WithStreaming(cb ModelStreamCallback) GenerateOption {
	return func(o *GenerateOptions) { o.Stream = cb }
}

// WithToolResponses resumes an interrupted generate by answering interrupted calls in place of
// their tools (parts from ToolDef.Respond or RespondPart). Pass the interrupted response's History
// with WithMessages.
func WithToolResponses(parts ...*Part) GenerateOption {
	return func(o *GenerateOptions) { o.ToolResponses = append(o.ToolResponses, parts...) }
}

// WithToolRestarts resumes an interrupted generate by running interrupted calls again, now with
// ToolContext.Resumed set (parts from ToolDef.Restart or RestartPart).
func WithToolRestarts(parts ...*Part) GenerateOption {
	return func(o *GenerateOptions) { o.ToolRestarts = append(o.ToolRestarts, parts...) }
}

// WithMiddleware wraps each model call in mws, the first given outermost, as Genkit Go's
// WithMiddleware does.
func WithMiddleware(mws ...ModelMiddleware) GenerateOption {
	return func(o *GenerateOptions) {
		for _, mw := range mws {
			o.Middleware = append(o.Middleware, &Middleware{
				Name: "model middleware",
				Model: func(ctx context.Context, req *ModelRequest, cb ModelStreamCallback, next ModelNext) (*ModelResponse, error) {
					return mw(next)(ctx, req, cb)
				},
			})
		}
	}
}

// WithGenerateMiddleware wraps each turn, model call and tool execution in mws, the first given
// outermost: Loupe's middleware, which sees the whole loop where WithMiddleware sees the model.
func WithGenerateMiddleware(mws ...*Middleware) GenerateOption {
	return func(o *GenerateOptions) { o.Middleware = append(o.Middleware, mws...) }
}
