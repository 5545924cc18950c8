// Command devui is Loupe: a dev UI and a durable agent engine for Go, in one binary. It is the
// same program a user's own binary gets from devui.Main, with Loupe's demo agents as its actions.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/cli"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/openai"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	cli.Main(&cli.Program{Name: "devui", Version: version, Registry: engine.NewRegistry(), Demo: registerDemo})
}

// registerDemo registers the demo agents, on the scripted models or, when OPENAI_BASE_URL or
// OPENAI_API_KEY is set, on that endpoint. LOUPE_DEMO_EFFECTS_LOG and LOUPE_DEMO_TOOL_DELAY are
// the crash harness's (make chaos).
func registerDemo(reg *engine.Registry, log *slog.Logger) error {
	cfg := demo.Config{
		Model:      os.Getenv("OPENAI_MODEL"),
		EffectsLog: os.Getenv("LOUPE_DEMO_EFFECTS_LOG"),
	}
	endpoint, remote := openai.FromEnv()
	if remote {
		cfg.OpenAI = endpoint
	}
	if d := os.Getenv("LOUPE_DEMO_TOOL_DELAY"); d != "" {
		delay, err := time.ParseDuration(d)
		if err != nil {
			return fmt.Errorf("LOUPE_DEMO_TOOL_DELAY: %w", err)
		}
		cfg.ToolDelay = delay
	}
	if err := demo.Register(bridge.NewApp(reg).(*loupe.App), cfg); err != nil {
		return err
	}
	if remote {
		log.Info("demo agents use the OpenAI-compatible endpoint", "base_url", cfg.OpenAI.BaseURL, "model", cfg.Model)
	} else {
		log.Info("demo agents use scripted models (set OPENAI_BASE_URL / OPENAI_API_KEY for a real one)")
	}
	return nil
}
