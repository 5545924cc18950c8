package templates

import (
	"context"
	"io"
	"strconv"
	"strings"

	"github.com/a-h/templ"
)

// Pager places one page of a long list (a run's conversation or its ledger): its items From to
// To, counted from 1, of Total, on page Page of Pages. The page of number n is at PageURL+n
// without JS, and at FragmentURL+n as a fragment, which the page's script puts in place.
type Pager struct {
	Noun                 string // what the items are: "messages", "tool calls"
	Page, Pages          int
	From, To, Total      int
	PageURL, FragmentURL string
}

// Count says which items the page shows: "messages 51–100 of 243".
func (p Pager) Count() string { return rangeOf(p.Noun, p.From, p.To, p.Total) }

func (p Pager) pageURL(n int) string     { return p.PageURL + strconv.Itoa(n) }
func (p Pager) fragmentURL(n int) string { return p.FragmentURL + strconv.Itoa(n) }

func rangeOf(noun string, from, to, total int) string {
	if total == 0 || to < from {
		return "no " + noun
	}
	return noun + " " + strconv.Itoa(from) + "–" + strconv.Itoa(to) + " of " + strconv.Itoa(total)
}

// ForkCall is a ledger entry a fork may edit the output of.
type ForkCall struct {
	Turn      int
	Ref, Tool string
}

// StreamView is one page of a run's stream: its chunks, grouped by the message they stream, and
// where the page sits in the whole stream. The page of a run's last chunks is Latest: the live
// stream goes on from it.
type StreamView struct {
	Groups []ChunkGroup
	// Offset counts the chunks before the page's first, Total all of the run's, Shown the page's.
	Offset, Shown, Total int
	FirstSeq, LastSeq    int64
	// MaxSeq is the run's last chunk's sequence number when the page was read.
	MaxSeq int64
	Latest bool
	// PageURL and FragmentURL address the stream's pages: before= or after= a sequence number
	// follows them.
	PageURL, FragmentURL string
}

// Count says which chunks the page shows: "chunks 4801–5000 of 5000".
func (v StreamView) Count() string {
	return rangeOf("chunks", v.Offset+1, v.Offset+v.Shown, v.Total)
}

// EarlierURL is the page before this one, without JS.
func (v StreamView) EarlierURL() string {
	return v.PageURL + "&before=" + strconv.FormatInt(v.FirstSeq, 10)
}

// LaterURL is the page after this one, without JS.
func (v StreamView) LaterURL() string {
	return v.PageURL + "&after=" + strconv.FormatInt(v.LastSeq, 10)
}

// ChunkGroup is the chunks of one streamed message (a turn's model or tool message, or a flow's
// own values), as the live stream groups them.
type ChunkGroup struct {
	Key    string // turn:index:role
	Role   string
	Turn   int
	Index  int
	Chunks []ChunkView
}

// ChunkView is one chunk: its time and what it says, part by part.
type ChunkView struct {
	Seq   int64
	Clock string // 15:04:05.000, UTC
	At    string // RFC 3339
	Flow  bool   // a flow's own value: shown after its time, one a line
	Parts []ChunkPart
}

// ChunkPart is a piece of a chunk: running text (Kind "") or a part shown as a line of its own.
type ChunkPart struct {
	Kind string // "", reasoning, tool-request, tool-response, media, data, other
	Text string
}

// chunkSpan renders a chunk as the live script does: its time first for a flow's value, then
// its parts, with no space anywhere that the data did not put there (the stream's body is
// preformatted, and templ would space a loop of text and elements).
func chunkSpan(ch ChunkView) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		var b strings.Builder
		b.WriteString(`<span data-seq="`)
		b.WriteString(strconv.FormatInt(ch.Seq, 10))
		b.WriteString(`" title="`)
		b.WriteString(templ.EscapeString(ch.Clock + " UTC"))
		b.WriteString(`">`)
		if ch.Flow {
			b.WriteString(`<time class="chunk-time muted small" datetime="`)
			b.WriteString(templ.EscapeString(ch.At))
			b.WriteString(`">`)
			b.WriteString(templ.EscapeString(ch.Clock + " "))
			b.WriteString(`</time>`)
		}
		for _, p := range ch.Parts {
			if p.Kind == "" {
				b.WriteString(templ.EscapeString(p.Text))
				continue
			}
			b.WriteString(`<span class="chunk-part part-`)
			b.WriteString(templ.EscapeString(p.Kind))
			b.WriteString(`">`)
			b.WriteString(templ.EscapeString(p.Text))
			b.WriteString(`</span>`)
		}
		b.WriteString(`</span>`)
		_, err := io.WriteString(w, b.String())
		return err
	})
}
