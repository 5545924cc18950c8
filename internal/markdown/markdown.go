// Package markdown turns the Markdown that agents and tool authors write (an interrupt's question,
// a schema's description) into HTML that is safe to put in a page. goldmark renders CommonMark
// with GitHub's extensions; bluemonday's user-content policy then keeps only inert markup, so a
// question carrying <script>, an on* attribute or a javascript: link shows as text or not at all,
// whatever goldmark let through.
package markdown

import (
	"bytes"
	"html"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

var (
	md = goldmark.New(goldmark.WithExtensions(extension.GFM))
	// policy is built once: bluemonday policies are safe for concurrent use after construction.
	policy = func() *bluemonday.Policy {
		p := bluemonday.UGCPolicy()
		p.RequireNoReferrerOnLinks(true)
		p.AddTargetBlankToFullyQualifiedLinks(true)
		return p
	}()
)

// HTML renders src as sanitised HTML. Text that is not Markdown comes back as one escaped
// paragraph, so callers need no second path for plain questions.
func HTML(src string) string {
	if strings.TrimSpace(src) == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := md.Convert([]byte(src), &buf); err != nil {
		// goldmark fails only when the writer does; a bytes.Buffer does not. Escaped text is the safe fallback.
		return "<p>" + html.EscapeString(src) + "</p>"
	}
	return policy.Sanitize(buf.String())
}
