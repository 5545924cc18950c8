// Package demo registers the demo agents a newcomer can run from the UI: a travel agent whose
// flight booking needs approval, a money transfer that asks for confirmation, a streaming
// countdown, and a research agent whose many turns make a large trace. Without a model endpoint
// they run on scripted models, deterministic per conversation, so they work offline.
package demo

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/openai"
	"github.com/loupe-dev/loupe/scripted"
)

// Config chooses the demos' model.
type Config struct {
	// OpenAI, when its BaseURL or APIKey is set, makes the demos use that endpoint's Model instead
	// of the scripted models.
	OpenAI openai.Config
	// Model is the model name at the endpoint (default gpt-4o-mini).
	Model string
	// EffectsLog, when set, is a file that gets a line each time a demo tool starts and ends
	// acting (LOUPE_DEMO_EFFECTS_LOG), for the crash harness to count executions.
	EffectsLog string
	// ToolDelay is how long each acting demo tool takes (LOUPE_DEMO_TOOL_DELAY; default none).
	ToolDelay time.Duration
}

// Register defines the demo flows, their tools and their models on app, with Loupe's public API
// only: they are what a user's own agent looks like.
func Register(app *loupe.App, cfg Config) error {
	models := map[string]string{}
	if cfg.OpenAI.BaseURL != "" || cfg.OpenAI.APIKey != "" {
		name := cfg.Model
		if name == "" {
			name = "gpt-4o-mini"
		}
		m, err := openai.Define(app, cfg.OpenAI, name)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		for _, k := range []string{"travel", "transfer", "research"} {
			models[k] = m.Name()
		}
	} else {
		models["travel"] = scripted.Define(app, "demo/travel", travelScript).Name()
		models["transfer"] = scripted.Define(app, "demo/transfer", transferScript).Name()
		models["research"] = scripted.Define(app, "demo/research", researchScript).Name()
	}
	fx, err := newEffects(cfg)
	if err != nil {
		return fmt.Errorf("demo: effects log: %w", err)
	}
	defineTravel(app, models["travel"], fx)
	defineTransfer(app, models["transfer"], fx)
	defineCountdown(app)
	defineResearch(app, models["research"], fx)
	return nil
}

// words streams a text as one chunk per word, as a real model does.
func words(text string) [][]*ai.Part {
	var chunks [][]*ai.Part
	fields := strings.SplitAfter(text, " ")
	for _, w := range fields {
		chunks = append(chunks, []*ai.Part{ai.NewTextPart(w)})
	}
	return chunks
}

// say is a scripted text turn streamed word by word.
func say(text string) scripted.Turn {
	return scripted.Text(text).WithChunks(words(text)...).WithUsage(len(text)/4+20, len(text)/4)
}

// toolResponses returns the tool responses in the last message of a request.
func toolResponses(req *ai.ModelRequest) []*ai.ToolResponse {
	if len(req.Messages) == 0 {
		return nil
	}
	var out []*ai.ToolResponse
	for _, p := range req.Messages[len(req.Messages)-1].Content {
		if p.ToolResponse != nil {
			out = append(out, p.ToolResponse)
		}
	}
	return out
}

// asMap reads a tool output as a JSON object, whatever Go type carries it (typed tools hand
// their outputs over as encoded JSON).
func asMap(v any) (map[string]any, bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// denied reports whether a tool response is a reviewer's denial.
func denied(resp *ai.ToolResponse) (string, bool) {
	m, ok := asMap(resp.Output)
	if !ok || m["denied"] != true {
		return "", false
	}
	reason, _ := m["reason"].(string)
	return reason, true
}

// firstUserText is the prompt of a conversation.
func firstUserText(req *ai.ModelRequest) string {
	for _, m := range req.Messages {
		if m.Role == ai.RoleUser {
			return m.Text()
		}
	}
	return ""
}
