package devui_test

import (
	"context"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/devui"
)

// A program with its own flow gets every devui command: here, its version.
func ExampleRun() {
	app := loupe.New()
	loupe.DefineFlow(app, "hello", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name, nil
	})
	_ = devui.Run(context.Background(), app, []string{"version"}, devui.WithName("myagent"), devui.WithVersion("1.2.3"))
	// Output: myagent 1.2.3
}

// A program of your own agents: `go run . serve --dev` serves the UI with them, `go run . worker`
// executes their runs, `go run . run greet --input '"Ada"' --wait` runs one from the shell.
func ExampleMain() {
	app := loupe.New()
	loupe.DefineFlow(app, "greet", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name, nil
	})
	devui.Main(app)
}
