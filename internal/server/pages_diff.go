package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/runs"
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
		Run: []templates.DiffGroup{group("input", d.Input), group("output", d.Output), group("error", d.Error)},
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
		dt := templates.DiffTurn{
			Turn: t.Turn, Equal: t.Equal, OnlyIn: t.OnlyIn,
			Groups:  []templates.DiffGroup{group("messages", t.Messages), group("model request", t.ModelRequest), group("model response", t.ModelResponse)},
			Tokens:  fmt.Sprintf("%d→%d in, %d→%d out", t.InputTokensA, t.InputTokensB, t.OutputTokensA, t.OutputTokensB),
			Latency: fmt.Sprintf("%.1f→%.1f ms", t.LatencyMsA, t.LatencyMsB),
		}
		for _, tc := range t.ToolCalls {
			dt.Tools = append(dt.Tools, templates.DiffTool{
				Ref: tc.Ref, Tool: tc.Tool, Equal: tc.Equal, OnlyIn: tc.OnlyIn,
				Status:   fmt.Sprintf("%s / %s", orDashStr(tc.StatusA), orDashStr(tc.StatusB)),
				Duration: fmt.Sprintf("%.1f→%.1f ms", tc.DurationMsA, tc.DurationMsB),
				Groups:   []templates.DiffGroup{group("input", tc.Input), group("output", tc.Output), group("error", tc.Error)},
			})
		}
		p.Turns = append(p.Turns, dt)
	}
	return s.render(c, http.StatusOK, templates.DiffView(p))
}

func group(part string, changes runs.Changes) templates.DiffGroup {
	g := templates.DiffGroup{Part: part}
	for _, ch := range changes {
		g.Changes = append(g.Changes, templates.DiffChange{Op: ch.Op, Path: ch.Path, A: jsonText(ch.A), B: jsonText(ch.B)})
	}
	return g
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
