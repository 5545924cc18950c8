package anthropic_test

import (
	"context"
	"fmt"
	"log"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/anthropic"
	"github.com/loupe-dev/loupe/scripted"
)

// A Claude model from the endpoint that ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL)
// name, or a scripted one when neither is set.
func ExampleDefine() {
	app := loupe.New()
	model := "scripted/echo"
	if cfg, ok := anthropic.FromEnv(); ok {
		m, err := anthropic.Define(app, cfg, "claude-haiku-5-5")
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
		ai.WithPrompt("Say hi"), ai.WithConfig(anthropic.GenerationConfig{MaxOutputTokens: 20}))
	fmt.Println(text, err)
}
