package ai_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/scripted"
)

type city struct {
	City string `json:"city"`
}

type forecast struct {
	TempC int `json:"tempC"`
}

// TestSchemasCompileOnceNotPerCall: a typed tool's schemas compile when it is defined, and an
// output type's the first time it is used; a generate compiles nothing more.
func TestSchemasCompileOnceNotPerCall(t *testing.T) { // not parallel: reads the global compile counter
	app := loupe.New()
	calls := 0
	w := loupe.DefineTool(app, "weather", "Weather.", func(tc *ai.ToolContext, in city) (forecast, error) {
		calls++
		return forecast{TempC: 4}, nil
	})
	before := ai.SchemaCompiles()
	for range 3 {
		m := scripted.New("m", scripted.Reply(scripted.ToolCall("weather", "", map[string]any{"city": "Paris"})), scripted.Text(`{"tempC": 4}`))
		_, err := loupe.Generate(context.Background(), app, ai.WithModel(m), ai.WithPrompt("q"), ai.WithTools(w),
			ai.WithOutputType(forecast{}))
		require.NoError(t, err)
	}
	require.Equal(t, 3, calls)
	require.LessOrEqual(t, ai.SchemaCompiles()-before, int64(1), "only WithOutputType's first use may compile; never per call")
}

type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children,omitempty"`
}

// TestSchemaOfATypeThatContainsItself: a recursive type is described with $ref, and validates.
func TestSchemaOfATypeThatContainsItself(t *testing.T) {
	t.Parallel()
	s, ok, err := ai.SchemaFor[node]()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.ValidateJSON([]byte(`{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}`)))
	require.Error(t, s.ValidateJSON([]byte(`{"name":"a","children":[{"name":1}]}`)))
	_, ok, err = ai.SchemaFor[*ai.ModelResponse]()
	require.NoError(t, err, "a flow may return a generate's response")
	require.True(t, ok)
}

// TestATypeNoSchemaDescribesPanicsNamingTheTool: a tool whose input type JSON cannot describe
// panics at definition with an error that names the tool and the type.
func TestATypeNoSchemaDescribesPanicsNamingTheTool(t *testing.T) {
	t.Parallel()
	type bad struct {
		C chan int `json:"c"`
	}
	require.PanicsWithError(t, `INVALID_ARGUMENT: tool "watch": input type ai_test.bad: no JSON schema can describe it: `+
		`unsupported type chan int`, func() {
		ai.NewTool("watch", "d", func(tc *ai.ToolContext, in bad) (string, error) { return "", nil })
	})
}
