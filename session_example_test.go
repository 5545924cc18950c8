package loupe_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loupe-dev/loupe"
)

// A flow names the conversation each run belongs to, here from its input, so that Loupe's runs
// list groups a chat's runs and its Sessions page sums them. The session is an attribute of the
// flow's span (gen_ai.conversation.id), shown here with an in-memory exporter.
func ExampleSetSession() {
	spans := tracetest.NewInMemoryExporter()
	app := loupe.New(loupe.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))))
	type turn struct {
		Chat    string `json:"chat"`
		Message string `json:"message"`
	}
	reply := loupe.DefineFlow(app, "reply", func(ctx context.Context, in turn) (string, error) {
		loupe.SetSession(ctx, in.Chat)
		return "you said: " + in.Message, nil
	})
	out, err := reply.Run(context.Background(), turn{Chat: "chat-42", Message: "hello"})
	fmt.Println(out, err)
	for _, s := range spans.GetSpans() {
		for _, a := range s.Attributes {
			if a.Key == "gen_ai.conversation.id" {
				fmt.Println(s.Name, "is in session", a.Value.AsString())
			}
		}
	}
	// Output:
	// you said: hello <nil>
	// reply is in session chat-42
}
