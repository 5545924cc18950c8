package pricing

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLookupMatchesVersionsNotVariants: a dated or versioned name takes its model's price, the
// most specific key wins, and a variant the table does not name has no price.
func TestLookupMatchesVersionsNotVariants(t *testing.T) {
	t.Parallel()
	tb := Builtin()
	for name, want := range map[string]Price{
		"gpt-4o":                     {2.50, 10},
		"openai/gpt-4o":              {2.50, 10},
		"GPT-4o-2024-08-06":          {2.50, 10},
		"gpt-4o-mini":                {0.15, 0.60},
		"gpt-4o-mini-2024-07-18":     {0.15, 0.60},
		"claude-sonnet-4-5-20250929": {3, 15},
		"claude-opus-4-5-20251101":   {5, 25},
		"claude-sonnet-4@20250514":   {3, 15},
		"claude-3-5-haiku-latest":    {0.80, 4},
		"googleai/gemini-2.5-flash":  {0.30, 2.50},
		"gemini-2.0-flash-001":       {0.10, 0.40},
		"gemini-2.5-flash-lite":      {0.10, 0.40},
	} {
		got, ok := tb.Lookup(name)
		require.True(t, ok, name)
		require.Equal(t, want, got, name)
	}
	for _, name := range []string{"", "demo/travel", "gpt-4o-audio-preview", "gemini-2.5-flash-preview-05-20",
		"gpt-4", "llama3.1:8b", "gpt-4.5"} {
		_, ok := tb.Lookup(name)
		require.False(t, ok, name)
	}
}

// TestCostIsUnknownWhenAModelIsNot: a run's cost adds each model's share, and one model without a
// price makes the whole cost unknown, with tokens or without.
func TestCostIsUnknownWhenAModelIsNot(t *testing.T) {
	t.Parallel()
	tb := Builtin()
	usd, ok := tb.Cost(map[string]Tokens{"gpt-4o": {Input: 1_000_000, Output: 100_000}, "claude-3-haiku-20240307": {Input: 2_000_000, Output: 0}})
	require.True(t, ok)
	require.InDelta(t, 2.50+1.0+0.50, usd, 1e-9)
	_, ok = tb.Cost(map[string]Tokens{"gpt-4o": {Input: 10}, "demo/travel": {Input: 5}})
	require.False(t, ok)
	_, ok = tb.Cost(map[string]Tokens{"demo/travel": {}})
	require.False(t, ok, "a model that reports no tokens is not known to be free")
	usd, ok = tb.Cost(nil)
	require.True(t, ok)
	require.Zero(t, usd)
}

// TestLoadOverridesAndExtends: a prices file replaces built-in prices, adds models and prefixes,
// and with builtin: false is the whole table; a broken file is an error naming it.
func TestLoadOverridesAndExtends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "prices.yaml")
	require.NoError(t, os.WriteFile(path, []byte("models:\n  gpt-4o: {input: 1, output: 2}\n  demo/travel: {input: 0.5, output: 0.5}\n  ft:gpt-4o-mini*: {input: 0.3, output: 1.2}\n"), 0o600))
	tb, err := Load(path)
	require.NoError(t, err)
	p, ok := tb.Lookup("gpt-4o-2024-08-06")
	require.True(t, ok)
	require.Equal(t, Price{1, 2}, p)
	p, ok = tb.Lookup("demo/travel")
	require.True(t, ok, "a key is normalized as names are")
	require.Equal(t, Price{0.5, 0.5}, p)
	p, ok = tb.Lookup("ft:gpt-4o-mini:acme:2024")
	require.True(t, ok)
	require.Equal(t, Price{0.3, 1.2}, p)
	_, ok = tb.Lookup("claude-3-haiku")
	require.True(t, ok, "the built-in prices stay under the file's")

	tb, err = Parse([]byte(`{"builtin": false, "models": {"my-model": {"input": 1, "output": 1}}}`))
	require.NoError(t, err)
	_, ok = tb.Lookup("gpt-4o")
	require.False(t, ok)
	_, ok = tb.Lookup("my-model")
	require.True(t, ok)

	tb, err = Parse(nil)
	require.NoError(t, err, "an empty file is the built-in table")
	_, ok = tb.Lookup("gpt-4o")
	require.True(t, ok)

	for _, bad := range []string{"models:\n  gpt-4o: {input: -1, output: 2}\n", "model:\n  gpt-4o: {input: 1}\n", "models: [1, 2]\n", "models:\n  '*': {input: 1}\n"} {
		_, err := Parse([]byte(bad))
		require.Error(t, err, bad)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
}
