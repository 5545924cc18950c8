package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/google/uuid"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// diffPage is GET /runs/{a}/diff/{b}: two runs compared turn by turn.
func (s *Server) diffPage(c echo.Context) error {
	d, err := s.runDiff(c)
	if err != nil {
		return err
	}
	a, b := d.A, d.B
	p := templates.DiffPage{
		Page: s.page(c, "Compare runs", "runs"), A: a.String(), B: b.String(), Equal: d.Equal,
		StatusA: d.StatusA, StatusB: d.StatusB, TurnsA: d.TurnsA, TurnsB: d.TurnsB,
		TokensDelta:  fmt.Sprintf("%+d in, %+d out", d.InputTokensDelta, d.OutputTokensDelta),
		LatencyDelta: fmt.Sprintf("%+.1f ms", d.LatencyMsDelta), Truncated: d.Truncated,
	}
	g := &diffGrouper{seen: map[string]string{}}
	p.Run = []templates.DiffGroup{g.group(diffLoc{"the run's input", "run-input"}, d.Input),
		g.group(diffLoc{"the run's output", "run-output"}, d.Output), g.group(diffLoc{"the run's error", "run-error"}, d.Error)}
	if p.RunA, err = s.diffRun(c, a); err != nil {
		return err
	}
	if p.RunB, err = s.diffRun(c, b); err != nil {
		return err
	}
	if f := d.First; f != nil {
		p.First = fmt.Sprintf("turn %d, %s", f.Turn, f.Part)
		if f.Turn < 0 {
			p.First = "the run's " + f.Part
		}
		if f.Ref != "" {
			p.First += " (ref " + f.Ref + ")"
		}
		if f.Path != "" {
			p.First += " at " + f.Path
		}
	}
	for _, t := range d.Turns {
		at := func(part string) diffLoc {
			return diffLoc{fmt.Sprintf("turn %d · %s", t.Turn, part), fmt.Sprintf("t%d-%s", t.Turn, strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(part))}
		}
		dt := templates.DiffTurn{
			Turn: t.Turn, Equal: t.Equal, OnlyIn: t.OnlyIn,
			Groups: []templates.DiffGroup{g.group(at("messages"), t.Messages), g.group(at("model request"), t.ModelRequest),
				g.group(at("model response"), t.ModelResponse)},
			Tokens:  fmt.Sprintf("%d→%d in, %d→%d out", t.InputTokensA, t.InputTokensB, t.OutputTokensA, t.OutputTokensB),
			Latency: fmt.Sprintf("%.1f→%.1f ms", t.LatencyMsA, t.LatencyMsB),
		}
		for _, tc := range t.ToolCalls {
			dt.Tools = append(dt.Tools, templates.DiffTool{
				Ref: tc.Ref, Tool: tc.Tool, Equal: tc.Equal, OnlyIn: tc.OnlyIn,
				Status:   fmt.Sprintf("%s / %s", orDashStr(tc.StatusA), orDashStr(tc.StatusB)),
				Duration: fmt.Sprintf("%.1f→%.1f ms", tc.DurationMsA, tc.DurationMsB),
				Groups: []templates.DiffGroup{g.group(at(tc.Tool+" (ref "+tc.Ref+") input"), tc.Input),
					g.group(at(tc.Tool+" (ref "+tc.Ref+") output"), tc.Output), g.group(at(tc.Tool+" (ref "+tc.Ref+") error"), tc.Error)},
			})
		}
		p.Turns = append(p.Turns, dt)
	}
	return s.render(c, http.StatusOK, templates.DiffView(p))
}

// diffGrouper turns a diff's changes into the page's groups. A change that the page already
// shows (the same value replaced by the same other value, as an edited tool output is in the
// tool's output, the tool message and the next model request) is shown once: its later rows say
// where, with a link.
type diffGrouper struct {
	seen map[string]string // the change's values -> "label\x00anchor" of the group that shows it
}

// diffLoc is where a group of changes is: its label and its anchor.
type diffLoc struct{ label, id string }

func (g *diffGrouper) group(at diffLoc, changes runs.Changes) templates.DiffGroup {
	label := at.label
	out := templates.DiffGroup{Part: label, ID: "diff-" + at.id}
	for _, ch := range changes {
		a, b := jsonText(ch.A), jsonText(ch.B)
		c := templates.DiffChange{Op: ch.Op, Path: ch.Path}
		key := ch.Op + "\x00" + a + "\x00" + b
		if where, ok := g.seen[key]; ok && len(a)+len(b) > 8 {
			c.SameAs, c.SameAsID, _ = strings.Cut(where, "\x00")
			out.Changes = append(out.Changes, c)
			continue
		}
		g.seen[key] = label + "\x00" + out.ID
		c.A, c.B = diffValue(a), diffValue(b)
		if sa, ok := ch.A.(string); ok {
			if sb, ok := ch.B.(string); ok && len(sa)+len(sb) <= maxDiffPreview {
				c.A.Spans, c.B.Spans = stringSpans(sa, sb)
			}
		}
		out.Changes = append(out.Changes, c)
	}
	return out
}

// stringSpans marks the change inside a string: A's text with what B lacks marked, and B's with
// what A lacks (a character diff, cleaned up to whole words where it helps reading).
func stringSpans(a, b string) (as, bs []templates.DiffSpan) {
	dmp := diffmatchpatch.New()
	diffs := dmp.DiffCleanupSemantic(dmp.DiffMain(a, b, false))
	for _, d := range diffs {
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			as = append(as, templates.DiffSpan{Text: d.Text})
			bs = append(bs, templates.DiffSpan{Text: d.Text})
		case diffmatchpatch.DiffDelete:
			as = append(as, templates.DiffSpan{Text: d.Text, Changed: true})
		case diffmatchpatch.DiffInsert:
			bs = append(bs, templates.DiffSpan{Text: d.Text, Changed: true})
		}
	}
	return as, bs
}

// diffRun is what the compare page's header says of a run.
func (s *Server) diffRun(c echo.Context, id uuid.UUID) (templates.DiffRun, error) {
	r, err := s.store.RunGet(c.Request().Context(), id)
	if err != nil {
		return templates.DiffRun{}, err
	}
	v := templates.DiffRun{Action: r.Action, Model: deref(r.Model), Mode: deref(r.ReplayMode)}
	switch {
	case v.Mode == "" && r.ForkOf != nil:
		v.Mode = store.ReplayFork
	case v.Mode == "":
		v.Mode = "original"
	}
	return v, nil
}

const (
	// maxDiffPreview is how much of a long value the compare page shows at first.
	maxDiffPreview = 2 << 10
	// maxDiffFull is the largest value the compare page holds in full (behind a <details>);
	// beyond it only the preview is in the page, so that a tool output of megabytes does not
	// make a page of megabytes.
	maxDiffFull = 256 << 10
)

// diffValue shortens a long value of a diff to a preview with its size.
func diffValue(text string) templates.DiffValue {
	if len(text) <= maxDiffPreview {
		return templates.DiffValue{Text: text}
	}
	cut := maxDiffPreview
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	v := templates.DiffValue{Text: text[:cut] + "…", Size: byteSize(len(text))}
	if len(text) <= maxDiffFull {
		v.Full = text
	}
	return v
}

// byteSize is a size in bytes in words.
func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// jsonText renders a diffed value; an absent one is shown as such.
func jsonText(v any) string {
	if v == nil {
		return "—"
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

func orDashStr(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// runDiff compares the runs named by the path parameters a and b; the page and the API share it.
func (s *Server) runDiff(c echo.Context) (*runs.RunDiff, error) {
	a, err := pathID(c, "a")
	if err != nil {
		return nil, err
	}
	b, err := pathID(c, "b")
	if err != nil {
		return nil, err
	}
	d, err := s.deps.Runs.Diff(c.Request().Context(), a, b)
	if err != nil {
		return nil, runsError(err)
	}
	return d, nil
}
