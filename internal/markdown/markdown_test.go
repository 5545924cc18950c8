package markdown

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHTMLRendersMarkdownAndDropsWhatCouldRun: emphasis, code, lists and links render; raw HTML,
// event handlers and javascript: links do not survive.
func TestHTMLRendersMarkdownAndDropsWhatCouldRun(t *testing.T) {
	t.Parallel()
	require.Equal(t, "<p>Confirm transfer of <strong>$10000</strong> to <code>judy</code>?</p>\n",
		HTML("Confirm transfer of **$10000** to `judy`?"))
	require.Contains(t, HTML("- one\n- two"), "<li>one</li>")
	require.Contains(t, HTML("[docs](https://example.com/a)"), `href="https://example.com/a"`)
	require.Contains(t, HTML("[docs](https://example.com/a)"), `rel="nofollow noreferrer noopener"`)
	for _, hostile := range []string{
		"<script>alert(1)</script>",
		`<img src=x onerror="alert(1)">`,
		"[click](javascript:alert(1))",
		`<a href="javascript:alert(1)">x</a>`,
	} {
		out := HTML(hostile)
		require.NotContains(t, out, "<script", hostile)
		require.NotContains(t, out, "onerror", hostile)
		require.NotContains(t, out, "javascript:", hostile)
	}
	require.Equal(t, "<p>a &lt; b &amp; c</p>\n", HTML("a < b & c"))
	require.Empty(t, HTML("  "))
}
