package loupe_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/scripted"
)

// A directory of .prompt files, as a Genkit app has it: each file is a prompt with its model,
// schemas and messages; partials start with an underscore.
func ExampleLoadPromptDir() {
	dir, _ := os.MkdirTemp("", "prompts")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "_polite.prompt"), []byte("Be polite."), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "greet.prompt"), []byte(`---
model: echo
input:
  schema:
    name: string
---
{{role "system"}}
{{> polite}}
{{role "user"}}
Greet {{name}}.
`), 0o644)

	app := loupe.New()
	scripted.Define(app, "echo", func(req *ai.ModelRequest) (scripted.Turn, error) {
		return scripted.Text(strings.TrimSpace(req.Messages[0].Text()) + " / " + strings.TrimSpace(req.Messages[1].Text())), nil
	})
	if err := loupe.LoadPromptDir(app, dir); err != nil {
		fmt.Println(err)
		return
	}
	resp, err := loupe.LookupPromptFile(app, "greet").Generate(context.Background(), map[string]any{"name": "Ada"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text())
	// Output: Be polite. / Greet Ada.
}
