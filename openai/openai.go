// Package openai provides models served by any OpenAI-compatible chat completions endpoint:
// OpenAI itself, Ollama, vLLM, LM Studio and the like, with tool calls and streaming.
package openai

import (
	"os"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/engine/openai"
)

// Config is the endpoint: its base URL (https://api.openai.com/v1 when empty) and API key, and
// optionally the HTTP client to call it with.
type Config = openai.Config

// GenerationConfig is the model configuration the provider understands (WithConfig); a map with
// the same JSON keys works too.
type GenerationConfig = openai.GenerationConfig

// FromEnv reads the endpoint from OPENAI_BASE_URL and OPENAI_API_KEY. ok is false when neither is
// set, so that a program can fall back to a scripted model.
func FromEnv() (cfg Config, ok bool) {
	cfg = Config{BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY")}
	return cfg, cfg.BaseURL != "" || cfg.APIKey != ""
}

// Define registers the model named model at the endpoint, as /model/openai/<model>, and returns
// it. It fails when a model of that name is registered already.
func Define(app *loupe.App, cfg Config, model string) (loupe.Model, error) {
	return openai.Define(bridge.AppRegistry(app), cfg, model)
}
