package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// promptLastRuns is how many of a prompt's last runs its playground lists.
const promptLastRuns = 10

// promptPlayground is the playground of a prompt action's page: for a prompt loaded from a
// .prompt file, its file and settings and its last runs; for a prompt defined in Go, only a note
// saying why there is none.
func (s *Server) promptPlayground(ctx context.Context, p *templates.ActionPage, desc *engine.ActionDesc, list []*engine.ActionDesc) error {
	t, err := s.promptByName(desc.Name)
	var apiErr *Error
	if errors.As(err, &apiErr) {
		if apiErr.Code == "not_a_file" {
			p.PromptNote = "This prompt is defined in Go code: its template is its render function, so the playground, which edits .prompt files, is not offered; run it below."
		}
		return nil
	}
	if err != nil {
		return err
	}
	src, err := os.ReadFile(t.file)
	if err != nil {
		return fmt.Errorf("read prompt %s: %w", t.name, err)
	}
	pg := &templates.PromptPlayground{Name: t.name, File: t.rel, Source: string(src),
		API: "/api/v1/prompts/" + url.PathEscape(t.name), Input: p.Action.Example,
		CanRun: p.CanRun, Editable: p.Admin && s.cfg.Dev, Dev: s.cfg.Dev}
	if fp, err := t.dir.Parse(t.key, string(src)); err != nil {
		pg.LoadError = promptFileError(t, err).Error()
	} else {
		o := fp.Options()
		pg.Model, pg.Tools = o.Model, strings.Join(o.Tools, ", ")
		if cfg, ok := o.Config.(map[string]any); ok {
			pg.Temperature = numberText(cfg["temperature"])
			pg.MaxOutputTokens = numberText(cfg["maxOutputTokens"])
		}
	}
	for _, a := range list {
		switch a.Type {
		case engine.ActionTypeModel:
			pg.Models = append(pg.Models, a.Name)
		case engine.ActionTypeTool, engine.ActionTypeToolV2:
			pg.ToolNames = append(pg.ToolNames, a.Name)
		}
	}
	slices.Sort(pg.Models)
	slices.Sort(pg.ToolNames)
	runs, err := s.promptRuns(ctx, t.name)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, r := range runs {
		started, _ := time.Parse(time.RFC3339Nano, r.StartedAt)
		row := templates.PromptRun{TraceID: r.TraceID, TraceURL: "/traces/" + r.TraceID, Status: r.Status, Edited: r.Edited,
			Model: r.Model, Tokens: fmt.Sprintf("%d / %d", r.InputTokens, r.OutputTokens),
			Latency: fmtNanos(int64(r.LatencyMS * float64(time.Millisecond))), Output: store.Shorten(r.Output, 160),
			StartedAt: started, Ago: humanAge(max(now.Sub(started), 0)) + " ago"}
		if r.RunID != "" {
			row.RunURL = "/runs/" + r.RunID
		}
		pg.Runs = append(pg.Runs, row)
	}
	p.Playground = pg
	return nil
}

// numberText is a front matter number as a field shows it; "" for none.
func numberText(v any) string {
	switch n := v.(type) {
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64)
	case uint64:
		return strconv.FormatUint(n, 10)
	case int64:
		return strconv.FormatInt(n, 10)
	case int:
		return strconv.Itoa(n)
	case json.Number:
		return n.String()
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// promptRuns are the prompt's last runs, newest first: the traces whose root is the prompt (from
// the playground, Run here, the reflection API or a durable run), with their model, tokens,
// latency and output, to compare an edit's run with.
func (s *Server) promptRuns(ctx context.Context, name string) ([]apiPromptRun, error) {
	list, _, err := s.reads.TraceList(ctx, store.TraceListParams{Limit: promptLastRuns, WithRoot: true, Filters: []store.TraceFilter{
		{Field: store.TraceFieldName, Op: store.FilterEq, Value: name},
		{Field: store.TraceFieldType, Op: store.FilterEq, Value: string(engine.ActionTypePrompt)},
	}})
	if err != nil {
		return nil, fmt.Errorf("last runs of prompt %s: %w", name, err)
	}
	out := make([]apiPromptRun, 0, len(list))
	for _, it := range list {
		r := apiPromptRun{TraceID: it.TraceID, Status: store.RunSucceeded, Model: it.Model, InputTokens: it.InputTokens, OutputTokens: it.OutputTokens,
			LatencyMS: float64(it.Duration()) / float64(time.Millisecond), StartedAt: time.Unix(0, it.StartTime).UTC().Format(time.RFC3339Nano)}
		switch {
		case it.EndTime == 0:
			r.Status = store.RunRunning
		case it.Failed():
			r.Status = store.RunFailed
		case it.Interrupted:
			r.Status = store.RunInterrupted
		}
		if it.RunID != nil {
			r.RunID = it.RunID.String()
		}
		if it.Root != nil {
			var attrs map[string]any
			if json.Unmarshal(it.Root.Attributes, &attrs) == nil {
				r.Edited = attrs[promptPlaygroundLabel] == "edited"
				if o, ok := attrs[engine.AttrOutput].(string); ok {
					var text string
					if json.Unmarshal([]byte(o), &text) == nil {
						o = text
					}
					r.Output = o
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}
