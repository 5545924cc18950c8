package openai_test

import (
	"context"
	"fmt"
	"log"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/openai"
	"github.com/loupe-dev/loupe/scripted"
)

// A model from the OpenAI-compatible endpoint that OPENAI_BASE_URL and OPENAI_API_KEY name (for
// Ollama, OPENAI_BASE_URL=http://127.0.0.1:11434/v1), or a scripted one when neither is set.
func ExampleDefine() {
	app := loupe.New()
	model := "scripted/echo"
	if cfg, ok := openai.FromEnv(); ok {
		m, err := openai.Define(app, cfg, "gpt-4o-mini")
		if err != nil {
			log.Fatal(err)
		}
		model = m.Name()
	} else {
		scripted.Define(app, model, func(req *ai.ModelRequest) (scripted.Turn, error) {
			return scripted.Text("offline"), nil
		})
	}
	text, err := loupe.GenerateText(context.Background(), app, ai.WithModelName(model),
		ai.WithPrompt("Say hi"), ai.WithConfig(openai.GenerationConfig{MaxOutputTokens: 20}))
	fmt.Println(text, err)
}
