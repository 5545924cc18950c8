package scripted_test

import (
	"context"
	"fmt"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/scripted"
)

// A scripted model that answers by the turn a conversation is at: deterministic however many
// runs share it.
func ExampleDefine() {
	app := loupe.New()
	scripted.Define(app, "greeter", func(req *ai.ModelRequest) (scripted.Turn, error) {
		return scripted.Text("Hello, "+req.Messages[len(req.Messages)-1].Text()+"!").WithUsage(3, 2), nil
	})
	resp, err := loupe.Generate(context.Background(), app, ai.WithModelName("greeter"), ai.WithPrompt("Ada"))
	fmt.Println(resp.Text(), resp.Usage.InputTokens, err)
	// Output: Hello, Ada! 3 <nil>
}

// A model that plays fixed turns in order.
func ExampleDefineTurns() {
	app := loupe.New()
	scripted.DefineTurns(app, "twice", scripted.Text("one"), scripted.Text("two"))
	for range 2 {
		text, _ := loupe.GenerateText(context.Background(), app, ai.WithModelName("twice"), ai.WithPrompt("go"))
		fmt.Println(text)
	}
	// Output:
	// one
	// two
}
