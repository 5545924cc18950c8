package server

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/pricing"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// The runs and interrupts API's response types: the wire shape is the API's own, written here, so
// that a store row can change (a column added, renamed or made internal) without changing what
// clients read. Each is filled from its store row by the function below it.

// apiRun is a run.
type apiRun struct {
	ID           uuid.UUID         `json:"id"`
	Action       string            `json:"action"`
	Input        json.RawMessage   `json:"input"`
	Status       string            `json:"status"`
	Output       json.RawMessage   `json:"output,omitempty"`
	Error        json.RawMessage   `json:"error,omitempty"`
	TraceID      *string           `json:"trace_id,omitempty"`
	Model        *string           `json:"model,omitempty"`
	Turns        int               `json:"turns"`
	InputTokens  int64             `json:"input_tokens"`
	OutputTokens int64             `json:"output_tokens"`
	ReplayOf     *uuid.UUID        `json:"replay_of,omitempty"`
	ReplayMode   *string           `json:"replay_mode,omitempty"`
	ForkOf       *uuid.UUID        `json:"fork_of,omitempty"`
	ForkTurn     *int              `json:"fork_turn,omitempty"`
	CreatedBy    *string           `json:"created_by,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	StartedAt    *time.Time        `json:"started_at,omitempty"`
	FinishedAt   *time.Time        `json:"finished_at,omitempty"`
	UpdatedAt    time.Time         `json:"updated_at"`
	Version      int64             `json:"version"`
	Resumes      int               `json:"resumes"`
	WaitedMs     int64             `json:"waited_ms"`
	Labels       map[string]string `json:"labels,omitempty"`
	// Context is the action context the run was started with (Genkit's runAction context).
	Context json.RawMessage `json:"context,omitempty"`
	// Usage is the run's tokens per model called; CostUSD prices them (serve --prices), null when
	// a model called has no price.
	Usage   map[string]apiModelUsage `json:"usage,omitempty"`
	CostUSD *float64                 `json:"cost_usd"`
}

// apiModelUsage is the tokens a run spent on one model.
type apiModelUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

func apiRunOf(r *store.Run, prices *pricing.Table) *apiRun {
	var usage map[string]apiModelUsage
	if len(r.Usage) > 0 {
		usage = make(map[string]apiModelUsage, len(r.Usage))
		for m, n := range r.Usage {
			usage[m] = apiModelUsage{InputTokens: n.Input, OutputTokens: n.Output}
		}
	}
	return &apiRun{Usage: usage, CostUSD: costUSD(prices.Cost(r.Usage)), ID: r.ID, Action: r.Action, Input: r.Input, Status: r.Status, Output: r.Output, Error: r.Error,
		TraceID: r.TraceID, Model: r.Model, Turns: r.Turns, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		ReplayOf: r.ReplayOf, ReplayMode: r.ReplayMode, ForkOf: r.ForkOf, ForkTurn: r.ForkTurn, CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, UpdatedAt: r.UpdatedAt,
		Version: r.Version, Resumes: r.Resumes, WaitedMs: r.WaitedMs, Labels: r.Labels, Context: r.Context}
}

func apiRunsOf(rs []*store.Run, prices *pricing.Table) []*apiRun {
	if rs == nil {
		return nil
	}
	out := make([]*apiRun, len(rs))
	for i, r := range rs {
		out[i] = apiRunOf(r, prices)
	}
	return out
}

// apiMessage is a message of a run's history.
type apiMessage struct {
	Seq        int             `json:"seq"`
	Turn       int             `json:"turn"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Generation int             `json:"generation,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
}

func apiMessagesOf(ms []*store.RunMessage) []*apiMessage {
	if ms == nil {
		return nil
	}
	out := make([]*apiMessage, len(ms))
	for i, m := range ms {
		out[i] = &apiMessage{Seq: m.Seq, Turn: m.Turn, Role: m.Role, Content: m.Content, Generation: m.Generation, CreatedAt: m.CreatedAt}
	}
	return out
}

// apiToolCall is a tool call of a run's ledger.
type apiToolCall struct {
	Turn           int             `json:"turn"`
	Ref            string          `json:"ref"`
	Tool           string          `json:"tool"`
	Input          json.RawMessage `json:"input"`
	Status         string          `json:"status"`
	Source         string          `json:"source"`
	Output         json.RawMessage `json:"output,omitempty"`
	Error          json.RawMessage `json:"error,omitempty"`
	Attempt        int             `json:"attempt"`
	IdempotencyKey string          `json:"idempotency_key"`
	StartedAt      time.Time       `json:"started_at"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
}

func apiToolCallsOf(tcs []*store.ToolCall) []*apiToolCall {
	if tcs == nil {
		return nil
	}
	out := make([]*apiToolCall, len(tcs))
	for i, t := range tcs {
		out[i] = &apiToolCall{Turn: t.Turn, Ref: t.Ref, Tool: t.Tool, Input: t.Input, Status: t.Status, Source: t.Source,
			Output: t.Output, Error: t.Error, Attempt: t.Attempt, IdempotencyKey: t.IdempotencyKey,
			StartedAt: t.StartedAt, FinishedAt: t.FinishedAt}
	}
	return out
}

// apiInterrupt is an interrupt: a tool call that waits for a person.
type apiInterrupt struct {
	ID                  uuid.UUID       `json:"id"`
	RunID               uuid.UUID       `json:"run_id"`
	Turn                int             `json:"turn"`
	Tool                string          `json:"tool"`
	Ref                 string          `json:"ref"`
	Input               json.RawMessage `json:"input"`
	Metadata            json.RawMessage `json:"metadata"`
	InputSchema         json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema        json.RawMessage `json:"output_schema,omitempty"`
	Status              string          `json:"status"`
	Resolution          json.RawMessage `json:"resolution,omitempty"`
	ResolvedBy          *string         `json:"resolved_by,omitempty"`
	ResolvedAt          *time.Time      `json:"resolved_at,omitempty"`
	Comment             *string         `json:"comment,omitempty"`
	Round               int             `json:"round"`
	CreatedAt           time.Time       `json:"created_at"`
	Version             int64           `json:"version"`
	SuggestedResolution json.RawMessage `json:"suggested_resolution,omitempty"`
	ClaimedBy           *string         `json:"claimed_by,omitempty"`
	ClaimedAt           *time.Time      `json:"claimed_at,omitempty"`
}

func apiInterruptOf(it *store.Interrupt) *apiInterrupt {
	return &apiInterrupt{ID: it.ID, RunID: it.RunID, Turn: it.Turn, Tool: it.Tool, Ref: it.Ref, Input: it.Input,
		Metadata: it.Metadata, InputSchema: it.InputSchema, OutputSchema: it.OutputSchema, Status: it.Status,
		Resolution: it.Resolution, ResolvedBy: it.ResolvedBy, ResolvedAt: it.ResolvedAt, Comment: it.Comment,
		Round: it.Round, CreatedAt: it.CreatedAt, Version: it.Version, SuggestedResolution: it.SuggestedResolution,
		ClaimedBy: it.ClaimedBy, ClaimedAt: it.ClaimedAt}
}

func apiInterruptsOf(its []*store.Interrupt) []*apiInterrupt {
	if its == nil {
		return nil
	}
	out := make([]*apiInterrupt, len(its))
	for i, it := range its {
		out[i] = apiInterruptOf(it)
	}
	return out
}

// apiAudit is one entry of an interrupt's audit trail.
type apiAudit struct {
	ID          int64           `json:"id"`
	At          time.Time       `json:"at"`
	Actor       string          `json:"actor"`
	Action      string          `json:"action"`
	SubjectType string          `json:"subject_type"`
	SubjectID   string          `json:"subject_id"`
	Details     json.RawMessage `json:"details"`
}

func apiAuditOf(es []*store.AuditEntry) []*apiAudit {
	if es == nil {
		return nil
	}
	out := make([]*apiAudit, len(es))
	for i, e := range es {
		out[i] = &apiAudit{ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, SubjectType: e.SubjectType,
			SubjectID: e.SubjectID, Details: e.Details}
	}
	return out
}

// apiWebhookDelivery is one attempt to post a notification about an interrupt.
type apiWebhookDelivery struct {
	Event string `json:"event"`
	// Target is the receiver's id and redacted URL; the URL itself may hold a token.
	Target      string     `json:"target"`
	DeliveryKey string     `json:"delivery_key"`
	Attempt     int        `json:"attempt"`
	AttemptedAt time.Time  `json:"attempted_at"`
	DurationMS  int        `json:"duration_ms"`
	StatusCode  *int       `json:"status_code"`
	Error       *string    `json:"error"`
	NextRetryAt *time.Time `json:"next_retry_at"`
}

func apiWebhookDeliveriesOf(ds []*store.WebhookDelivery) []*apiWebhookDelivery {
	out := make([]*apiWebhookDelivery, len(ds))
	for i, d := range ds {
		out[i] = &apiWebhookDelivery{Event: d.Event, Target: d.Target, DeliveryKey: d.DeliveryKey, Attempt: d.Attempt,
			AttemptedAt: d.AttemptedAt, DurationMS: d.DurationMS, StatusCode: d.StatusCode, Error: d.Error, NextRetryAt: d.NextRetryAt}
	}
	return out
}

// apiChunk is a streamed chunk of a run.
type apiChunk struct {
	Seq       int64           `json:"seq"`
	Turn      int             `json:"turn"`
	Index     int             `json:"index"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CreatedAt time.Time       `json:"created_at"`
}

func apiChunksOf(cs []*store.RunChunk) []*apiChunk {
	if cs == nil {
		return nil
	}
	out := make([]*apiChunk, len(cs))
	for i, c := range cs {
		out[i] = &apiChunk{Seq: c.Seq, Turn: c.Turn, Index: c.Index, Role: c.Role, Content: c.Content, CreatedAt: c.CreatedAt}
	}
	return out
}

// apiTrace is a trace in GET /api/v1/traces: its summary, as folded at ingest.
type apiTrace struct {
	TraceID      string     `json:"trace_id"`
	DisplayName  string     `json:"display_name"`
	RootSpanID   *string    `json:"root_span_id,omitempty"`
	StartTime    int64      `json:"start_time_unix_nano"`
	EndTime      int64      `json:"end_time_unix_nano"`
	StatusCode   int16      `json:"status_code"`
	SpanCount    int        `json:"span_count"`
	Source       string     `json:"source"`
	RunID        *uuid.UUID `json:"run_id,omitempty"`
	UpdatedAt    time.Time  `json:"updated_at"`
	Service      string     `json:"service,omitempty"`
	Model        string     `json:"model,omitempty"`
	ModelCalls   int        `json:"model_calls"`
	InputTokens  int64      `json:"input_tokens"`
	OutputTokens int64      `json:"output_tokens"`
	ToolCalls    int        `json:"tool_calls"`
	ToolErrors   int        `json:"tool_errors"`
	LastEnd      int64      `json:"last_end_time_unix_nano"`
	ErrorSpans   int        `json:"error_spans"`
	Interrupted  bool       `json:"interrupted"`
}

func apiTracesOf(ts []store.Trace) []*apiTrace {
	out := make([]*apiTrace, len(ts))
	for i := range ts {
		t := &ts[i]
		out[i] = &apiTrace{TraceID: t.TraceID, DisplayName: t.DisplayName, RootSpanID: t.RootSpanID, StartTime: t.StartTime,
			EndTime: t.EndTime, StatusCode: t.StatusCode, SpanCount: t.SpanCount, Source: t.Source, RunID: t.RunID,
			UpdatedAt: t.UpdatedAt, Service: t.Service, Model: t.Model, ModelCalls: t.ModelCalls, InputTokens: t.InputTokens,
			OutputTokens: t.OutputTokens, ToolCalls: t.ToolCalls, ToolErrors: t.ToolErrors, LastEnd: t.LastEnd, ErrorSpans: t.ErrorSpans,
			Interrupted: t.Interrupted && !t.Failed()}
	}
	return out
}

// apiLineage is GET /api/v1/runs/{id}/lineage: where a run comes from, what was derived from it,
// how it was replayed, and the decisions offered as defaults for its interrupts.
type apiLineage struct {
	RunID       uuid.UUID        `json:"run_id"`
	Of          *apiLineageLink  `json:"of"`
	Derived     []apiLineageLink `json:"derived"`
	Replay      *apiReplay       `json:"replay"`
	Suggestions []apiSuggestion  `json:"suggested_resolutions"`
}

type apiLineageLink struct {
	RunID      uuid.UUID       `json:"run_id"`
	Relation   string          `json:"relation"`
	Mode       *string         `json:"mode,omitempty"`
	ForkTurn   *int            `json:"fork_turn,omitempty"`
	Action     string          `json:"action"`
	Status     string          `json:"status"`
	CreatedAt  time.Time       `json:"created_at"`
	Divergence json.RawMessage `json:"divergence,omitempty"`
}

type apiReplay struct {
	RunID            uuid.UUID       `json:"run_id"`
	SourceRunID      *uuid.UUID      `json:"source_run_id,omitempty"`
	Mode             string          `json:"mode"`
	Tools            string          `json:"tools"`
	ApplyResolutions bool            `json:"apply_resolutions"`
	Overrides        json.RawMessage `json:"overrides,omitempty"`
	Edits            json.RawMessage `json:"edits,omitempty"`
	Divergence       json.RawMessage `json:"divergence,omitempty"`
	CreatedAt        time.Time       `json:"created_at"`
}

type apiSuggestion struct {
	InterruptID uuid.UUID       `json:"interrupt_id"`
	Turn        int             `json:"turn"`
	Ref         string          `json:"ref"`
	Tool        string          `json:"tool"`
	Status      string          `json:"status"`
	Suggestion  json.RawMessage `json:"suggested_resolution"`
}

func apiLineageOf(info *runs.ReplayInfo) *apiLineage {
	link := func(l *store.LineageLink) apiLineageLink {
		return apiLineageLink{RunID: l.RunID, Relation: l.Relation, Mode: l.Mode, ForkTurn: l.ForkTurn, Action: l.Action,
			Status: l.Status, CreatedAt: l.CreatedAt, Divergence: l.Divergence}
	}
	out := &apiLineage{RunID: info.RunID, Suggestions: []apiSuggestion{}}
	if info.Lineage != nil {
		if info.Of != nil {
			of := link(info.Of)
			out.Of = &of
		}
		if info.Derived != nil {
			out.Derived = make([]apiLineageLink, len(info.Derived))
			for i, d := range info.Derived {
				out.Derived[i] = link(d)
			}
		}
	}
	if r := info.Replay; r != nil {
		out.Replay = &apiReplay{RunID: r.RunID, SourceRunID: r.SourceRunID, Mode: r.Mode, Tools: r.Tools,
			ApplyResolutions: r.ApplyResolutions, Overrides: r.Overrides, Edits: r.Edits, Divergence: r.Divergence, CreatedAt: r.CreatedAt}
	}
	for _, sg := range info.Suggestions {
		out.Suggestions = append(out.Suggestions, apiSuggestion{InterruptID: sg.InterruptID, Turn: sg.Turn, Ref: sg.Ref,
			Tool: sg.Tool, Status: sg.Status, Suggestion: sg.Suggestion})
	}
	return out
}
