package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
)

// TestEditFrontMatterSetsOnlyWhatChanges: edits that change nothing give the source back byte
// for byte; a changed model, temperature and tools are written into the front matter with its
// comments and the body untouched; a removed value goes, and an empty config with it; a source
// without front matter gets one.
func TestEditFrontMatterSetsOnlyWhatChanges(t *testing.T) {
	t.Parallel()
	const src = "---\n# the desk\nmodel: pf/desk # inline\nconfig:\n  temperature: 0.3\ntools: [a, b]\n---\nHello {{name}}.\n"
	same, err := engine.EditFrontMatter("x.prompt", src, []engine.FrontMatterEdit{
		{Path: []string{"model"}, Value: "pf/desk"},
		{Path: []string{"config", "temperature"}, Value: 0.3},
		{Path: []string{"tools"}, Value: []string{"a", "b"}},
		{Path: []string{"config", "maxOutputTokens"}, Delete: true},
	})
	require.NoError(t, err)
	require.Equal(t, src, same, "nothing changed: the source as it was")

	out, err := engine.EditFrontMatter("x.prompt", src, []engine.FrontMatterEdit{
		{Path: []string{"model"}, Value: "pf/other"},
		{Path: []string{"config", "maxOutputTokens"}, Value: 64},
		{Path: []string{"tools"}, Value: []string{"c"}},
	})
	require.NoError(t, err)
	require.Equal(t, "---\n# the desk\nmodel: pf/other # inline\nconfig:\n  temperature: 0.3\n  maxOutputTokens: 64\ntools:\n- c\n---\nHello {{name}}.\n", out)

	out, err = engine.EditFrontMatter("x.prompt", src, []engine.FrontMatterEdit{{Path: []string{"config", "temperature"}, Delete: true}})
	require.NoError(t, err)
	require.NotContains(t, out, "config", "an emptied config goes")
	require.Contains(t, out, "Hello {{name}}.\n")

	out, err = engine.EditFrontMatter("x.prompt", "Hi.\n", []engine.FrontMatterEdit{{Path: []string{"model"}, Value: "m"}})
	require.NoError(t, err)
	require.Equal(t, "---\nmodel: m\n---\nHi.\n", out)

	_, err = engine.EditFrontMatter("x.prompt", "---\nmodel: [\n---\nHi\n", []engine.FrontMatterEdit{{Path: []string{"model"}, Value: "m"}})
	var fe *engine.PromptFileError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Positive(t, fe.Line)
}

// TestPromptDirParsesAnEditWithoutRegisteringIt: Parse compiles a new source for a loaded prompt
// with the directory's partials, leaves the registered prompt as it was, names the line of a
// broken edit, and knows no prompt outside the directory; File gives the prompt's own file.
func TestPromptDirParsesAnEditWithoutRegisteringIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "greet.prompt"), []byte("---\nmodel: m\n---\nHello {{name}}.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "_sig.prompt"), []byte("-- the desk"), 0o644))
	reg := engine.NewRegistry()
	d, err := engine.LoadPromptDir(reg, dir)
	require.NoError(t, err)
	file, ok := d.File("/prompt/greet")
	require.True(t, ok)
	require.Equal(t, filepath.Join(dir, "greet.prompt"), file)
	_, ok = d.File("/prompt/../greet")
	require.False(t, ok)

	p, err := d.Parse("/prompt/greet", "---\nmodel: m2\nconfig:\n  temperature: 0.5\n---\nBye {{name}}. {{> sig}}\n")
	require.NoError(t, err)
	msgs, err := p.Render([]byte(`{"name":"Ann"}`), nil)
	require.NoError(t, err)
	require.Equal(t, "Bye Ann. -- the desk", msgs[0].Text())
	require.Equal(t, "m2", p.Options().Model)
	require.Equal(t, map[string]any{"temperature": 0.5}, p.Options().Config)

	reg2, ok := reg.Lookup("/prompt/greet").(*engine.FilePrompt)
	require.True(t, ok)
	msgs, err = reg2.Render([]byte(`{"name":"Ann"}`), nil)
	require.NoError(t, err)
	require.Equal(t, "Hello Ann.", msgs[0].Text(), "the registered prompt is unchanged")

	_, err = d.Parse("/prompt/greet", "---\nmodel: m\n---\nline two\n{{#if name}}x{{/each}}\nend\n")
	var fe *engine.PromptFileError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, 5, fe.Line, "%v", err)

	_, err = d.Parse("/prompt/other", "Hi")
	require.Error(t, err)
}
