package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Span sources, as in the spans.source column.
const (
	SpanSourceLoupe  = "loupe"
	SpanSourceGenkit = "genkit"
	SpanSourceOTLP   = "otlp"
)

// DisplayNameMax is the most characters of a root span's name that a trace's summary keeps as its
// display name: indexed for the trace list, which a B-tree allows up to about 2,700 bytes. The
// span itself keeps its whole name.
const DisplayNameMax = 500

var displayNameMaxSQL = strconv.Itoa(DisplayNameMax)

// TruncateDisplayName cuts a name to DisplayNameMax characters, as the summary stores it.
func TruncateDisplayName(name string) string {
	name, _ = TruncateRunes(name, DisplayNameMax)
	return name
}

// SpanSources lists every span source.
var SpanSources = []string{SpanSourceLoupe, SpanSourceGenkit, SpanSourceOTLP}

// Span status codes, in OTLP's numbering (Genkit JS uses the same; Genkit Go does not, and its
// ingest maps it).
const (
	StatusUnset int16 = 0
	StatusOK    int16 = 1
	StatusError int16 = 2
)

// Span is one stored OpenTelemetry span. Times are Unix nanoseconds; EndTime is 0 while the span
// is running. Attributes, Resource are JSON objects; Events and Links are JSON arrays.
type Span struct {
	TraceID       string          `db:"trace_id" json:"trace_id"`
	SpanID        string          `db:"span_id" json:"span_id"`
	ParentSpanID  *string         `db:"parent_span_id" json:"parent_span_id,omitempty"`
	Name          string          `db:"name" json:"name"`
	Kind          int16           `db:"kind" json:"kind"`
	StartTime     int64           `db:"start_time_unix_nano" json:"start_time_unix_nano"`
	EndTime       int64           `db:"end_time_unix_nano" json:"end_time_unix_nano"`
	StatusCode    int16           `db:"status_code" json:"status_code"`
	StatusMessage string          `db:"status_message" json:"status_message,omitempty"`
	Attributes    json.RawMessage `db:"attributes" json:"attributes"`
	Events        json.RawMessage `db:"events" json:"events"`
	Links         json.RawMessage `db:"links" json:"links"`
	Resource      json.RawMessage `db:"resource" json:"resource"`
	Scope         string          `db:"scope" json:"scope,omitempty"`
	ScopeVersion  string          `db:"scope_version" json:"scope_version,omitempty"`
	Source        string          `db:"source" json:"source"`
	RunID         *uuid.UUID      `db:"run_id" json:"run_id,omitempty"`
}

// spanReadColumns are the columns a span is read with. The JSON columns are json, sent back as
// stored and scanned as bytes, so reading a large trace neither prints nor validates them.
const spanReadColumns = `trace_id, span_id, parent_span_id, name, kind, start_time_unix_nano,
	end_time_unix_nano, status_code, status_message, attributes, events, links, resource, scope,
	scope_version, source, run_id`

// spanColumns are the columns a span is written with: spanReadColumns and its flags (spanFlags).
const spanColumns = spanReadColumns + `, flags`

// SpansByTrace returns every span of a trace, in start order. sizeHint, the trace's span count
// when known, saves regrowing the result.
//
// Rows come back in primary-key order and are sorted here: sorting megabytes of wide rows in
// PostgreSQL would spill past work_mem, and a 10,000-span trace must load in well under 50 ms.
func (s *Store) SpansByTrace(ctx context.Context, traceID string, sizeHint int) ([]Span, error) {
	lo, hi, err := s.spanStartsOf(ctx, traceID)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT `+spanReadColumns+` FROM spans WHERE trace_id = $1`+spanStartsBetween(2), traceID, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("spans of trace %s: %w", traceID, err)
	}
	spans, err := appendSpansRaw(make([]Span, 0, max(sizeHint, 16)), rows)
	if err != nil {
		return nil, fmt.Errorf("spans of trace %s: %w", traceID, err)
	}
	slices.SortFunc(spans, func(a, b Span) int {
		if a.StartTime != b.StartTime {
			if a.StartTime < b.StartTime {
				return -1
			}
			return 1
		}
		return strings.Compare(a.SpanID, b.SpanID)
	})
	return spans, nil
}

// appendSpansRaw decodes spanReadColumns rows from their binary wire values. It is the one hand
// written row loop in the store, for the hottest read there is: it skips pgx's per-column scan
// plans and shares the strings that repeat on every row of a trace, halving allocations.
func appendSpansRaw(spans []Span, rows pgx.Rows) ([]Span, error) {
	defer rows.Close()
	if !rawSpanRows(rows, 17) {
		return pgx.AppendRows(spans, rows, scanSpan)
	}
	d := spanDecoder{interned: map[string]string{}}
	for rows.Next() {
		sp, err := d.span(rows.RawValues())
		if err != nil {
			return spans, err
		}
		spans = append(spans, sp)
	}
	return spans, rows.Err()
}

// rawSpanRows reports whether rows hold n columns that begin with spanReadColumns, with the
// numbers and the uuid in binary, as spanDecoder reads them (text columns are the same bytes in
// either format).
func rawSpanRows(rows pgx.Rows, n int) bool {
	fds := rows.FieldDescriptions()
	if len(fds) != n {
		return false
	}
	for _, i := range []int{4, 5, 6, 7, 16} {
		if fds[i].Format != pgx.BinaryFormatCode {
			return false
		}
	}
	return true
}

// spanDecoder decodes the spanReadColumns of a row's raw values, sharing repeated strings.
type spanDecoder struct{ interned map[string]string }

func (d *spanDecoder) intern(b []byte) string {
	if s, ok := d.interned[string(b)]; ok {
		return s
	}
	s := string(b)
	d.interned[s] = s
	return s
}

func rawInt16(b []byte) int16 { return int16(uint16(b[0])<<8 | uint16(b[1])) }

func rawInt64(b []byte) int64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return int64(v)
}

func (d *spanDecoder) span(v [][]byte) (Span, error) {
	if len(v[4]) != 2 || len(v[5]) != 8 || len(v[6]) != 8 || len(v[7]) != 2 {
		return Span{}, fmt.Errorf("unexpected span row encoding")
	}
	sp := Span{
		TraceID: d.intern(v[0]), SpanID: string(v[1]), Name: d.intern(v[3]),
		Kind: rawInt16(v[4]), StartTime: rawInt64(v[5]), EndTime: rawInt64(v[6]), StatusCode: rawInt16(v[7]),
		StatusMessage: d.intern(v[8]),
		Scope:         d.intern(v[13]), ScopeVersion: d.intern(v[14]), Source: d.intern(v[15]),
	}
	if v[9] != nil {
		sp.Attributes = json.RawMessage(slices.Clone(v[9]))
	}
	if v[10] != nil {
		sp.Events = json.RawMessage(d.intern(v[10]))
	}
	if v[11] != nil {
		sp.Links = json.RawMessage(d.intern(v[11]))
	}
	if v[12] != nil {
		sp.Resource = json.RawMessage(d.intern(v[12]))
	}
	if v[2] != nil {
		p := d.intern(v[2])
		sp.ParentSpanID = &p
	}
	if v[16] != nil {
		if len(v[16]) != 16 {
			return Span{}, fmt.Errorf("unexpected run id encoding")
		}
		id := uuid.UUID(v[16])
		sp.RunID = &id
	}
	return sp, nil
}

// SpanSkeleton is a span read without its payloads (Attributes, Events, Links and Resource are
// empty), with what a tree needs to know of them.
type SpanSkeleton struct {
	Span
	// PayloadBytes is the size of the span's attributes, events, links and resource as stored.
	PayloadBytes int64
	// Interrupted is genkit:state = "interrupted", a tool that asked a question.
	Interrupted bool
}

// SpanSkeletonsByTrace returns every span of a trace without its payloads, in start order, as
// SpansByTrace does. The attributes are looked into only when they hold the word "interrupted".
func (s *Store) SpanSkeletonsByTrace(ctx context.Context, traceID string, sizeHint int) ([]SpanSkeleton, error) {
	lo, hi, err := s.spanStartsOf(ctx, traceID)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT trace_id, span_id, parent_span_id, name, kind,
		start_time_unix_nano, end_time_unix_nano, status_code, status_message,
		NULL::json, NULL::json, NULL::json, NULL::json, scope, scope_version, source, run_id,
		(octet_length(attributes::text) + octet_length(events::text) + octet_length(links::text) +
			octet_length(resource::text))::int8,
		CASE WHEN strpos(attributes::text, 'interrupted') > 0 AND json_typeof(attributes) = 'object'
			THEN coalesce(attributes->>'genkit:state' = 'interrupted', false) ELSE false END
		FROM spans WHERE trace_id = $1`+spanStartsBetween(2), traceID, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("span skeletons of trace %s: %w", traceID, err)
	}
	sks, err := appendSkeletonsRaw(make([]SpanSkeleton, 0, max(sizeHint, 16)), rows)
	if err != nil {
		return nil, fmt.Errorf("span skeletons of trace %s: %w", traceID, err)
	}
	slices.SortFunc(sks, func(a, b SpanSkeleton) int {
		if a.StartTime != b.StartTime {
			if a.StartTime < b.StartTime {
				return -1
			}
			return 1
		}
		return strings.Compare(a.SpanID, b.SpanID)
	})
	return sks, nil
}

// appendSkeletonsRaw decodes SpanSkeletonsByTrace's rows as appendSpansRaw does spans.
func appendSkeletonsRaw(sks []SpanSkeleton, rows pgx.Rows) ([]SpanSkeleton, error) {
	defer rows.Close()
	fds := rows.FieldDescriptions()
	if !rawSpanRows(rows, 19) || fds[17].Format != pgx.BinaryFormatCode || fds[18].Format != pgx.BinaryFormatCode {
		return pgx.AppendRows(sks, rows, func(row pgx.CollectableRow) (SpanSkeleton, error) {
			var sk SpanSkeleton
			var attrs, events, links, resource []byte
			err := row.Scan(&sk.TraceID, &sk.SpanID, &sk.ParentSpanID, &sk.Name, &sk.Kind, &sk.StartTime,
				&sk.EndTime, &sk.StatusCode, &sk.StatusMessage, &attrs, &events, &links, &resource, &sk.Scope,
				&sk.ScopeVersion, &sk.Source, &sk.RunID, &sk.PayloadBytes, &sk.Interrupted)
			return sk, err
		})
	}
	d := spanDecoder{interned: map[string]string{}}
	for rows.Next() {
		v := rows.RawValues()
		sp, err := d.span(v)
		if err != nil {
			return sks, err
		}
		if len(v[17]) != 8 || len(v[18]) != 1 {
			return sks, fmt.Errorf("unexpected span skeleton row encoding")
		}
		sks = append(sks, SpanSkeleton{Span: sp, PayloadBytes: rawInt64(v[17]), Interrupted: v[18][0] != 0})
	}
	return sks, rows.Err()
}

// scanSpan scans spanReadColumns without reflection.
func scanSpan(row pgx.CollectableRow) (Span, error) {
	var sp Span
	var attrs, events, links, resource []byte
	err := row.Scan(&sp.TraceID, &sp.SpanID, &sp.ParentSpanID, &sp.Name, &sp.Kind, &sp.StartTime,
		&sp.EndTime, &sp.StatusCode, &sp.StatusMessage, &attrs, &events, &links, &resource, &sp.Scope,
		&sp.ScopeVersion, &sp.Source, &sp.RunID)
	sp.Attributes, sp.Events, sp.Links, sp.Resource = attrs, events, links, resource
	return sp, err
}

// minInt64SQL and maxInt64SQL are int8's bounds, all span start times (spanStartsOrAll).
const minInt64SQL, maxInt64SQL = `(-9223372036854775807 - 1)`, `9223372036854775807`

// SpansGet returns the spans with the given keys that exist, in no particular order, each read
// in its trace's days only, bounded by its summary's span start times (pruned as it runs).
func (s *Store) SpansGet(ctx context.Context, keys []SpanKey) ([]Span, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	traceIDs, spanIDs := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		traceIDs[i], spanIDs[i] = k.TraceID, k.SpanID
	}
	rows, err := s.db.Query(ctx, `SELECT d.* FROM (SELECT DISTINCT * FROM unnest($1::text[], $2::text[])) AS s(trace_id, span_id)
		JOIN traces t ON t.trace_id = s.trace_id
		CROSS JOIN LATERAL (SELECT `+spanReadColumns+` FROM spans c
			WHERE c.trace_id = s.trace_id AND c.span_id = s.span_id
				AND c.start_time_unix_nano BETWEEN
					CASE WHEN t.span_start_max_unix_nano = 0 THEN `+minInt64SQL+` ELSE t.span_start_min_unix_nano END
					AND CASE WHEN t.span_start_max_unix_nano = 0 THEN `+maxInt64SQL+` ELSE t.span_start_max_unix_nano END
			OFFSET 0) d`, traceIDs, spanIDs)
	if err != nil {
		return nil, fmt.Errorf("get %d spans: %w", len(keys), err)
	}
	spans, err := pgx.CollectRows(rows, scanSpan)
	if err != nil {
		return nil, fmt.Errorf("get %d spans: %w", len(keys), err)
	}
	return spans, nil
}

// SpanKey names one span.
type SpanKey struct {
	TraceID string
	SpanID  string
}

// SpanTurnFacts is what a per-turn summary needs of one span, extracted in SQL so that the
// attributes of a large trace are never decoded in Go.
type SpanTurnFacts struct {
	SpanID       string  `db:"span_id"`
	ParentSpanID *string `db:"parent_span_id"`
	Name         string  `db:"name"`
	StartTime    int64   `db:"start_time_unix_nano"`
	EndTime      int64   `db:"end_time_unix_nano"`
	StatusCode   int16   `db:"status_code"`
	TurnIndex    *string `db:"turn_index"`    // loupe.turn.index
	GenkitName   *string `db:"genkit_name"`   // genkit:name
	GenkitType   *string `db:"genkit_type"`   // genkit:type
	Subtype      *string `db:"subtype"`       // genkit:metadata:subtype
	State        *string `db:"state"`         // genkit:state
	Operation    *string `db:"operation"`     // gen_ai.operation.name
	Model        *string `db:"model"`         // gen_ai.request.model
	ToolName     *string `db:"tool_name"`     // gen_ai.tool.name
	InputTokens  *string `db:"input_tokens"`  // gen_ai.usage.input_tokens
	OutputTokens *string `db:"output_tokens"` // gen_ai.usage.output_tokens
	// ResponseModel is gen_ai.response.model, FinishReasons gen_ai.response.finish_reasons (its
	// JSON text when an array), ToolCallID gen_ai.tool.call.id.
	ResponseModel *string `db:"response_model"`
	FinishReasons *string `db:"finish_reasons"`
	ToolCallID    *string `db:"tool_call_id"`
	StatusMessage string  `db:"status_message"`
	// ModelOutput is genkit:output of a Genkit model span without gen_ai usage attributes, whose
	// usage the caller parses.
	ModelOutput *string `db:"model_output"`
}

// SpanTurnFactsByTrace returns the turn-relevant facts of every span of a trace, in start order.
func (s *Store) SpanTurnFactsByTrace(ctx context.Context, traceID string) ([]SpanTurnFacts, error) {
	lo, hi, err := s.spanStartsOf(ctx, traceID)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `
		SELECT s.span_id, s.parent_span_id, s.name, s.start_time_unix_nano, s.end_time_unix_nano,
			s.status_code, a."loupe.turn.index" AS turn_index, a."genkit:name" AS genkit_name,
			a."genkit:type" AS genkit_type, a."genkit:metadata:subtype" AS subtype, a."genkit:state" AS state,
			a."gen_ai.operation.name" AS operation, a."gen_ai.request.model" AS model,
			a."gen_ai.tool.name" AS tool_name, a."gen_ai.usage.input_tokens" AS input_tokens,
			a."gen_ai.usage.output_tokens" AS output_tokens,
			CASE WHEN a."genkit:metadata:subtype" = 'model' AND a."gen_ai.usage.input_tokens" IS NULL
				AND a."gen_ai.usage.output_tokens" IS NULL THEN a."genkit:output" END AS model_output,
			a."gen_ai.response.model" AS response_model, a."gen_ai.response.finish_reasons" AS finish_reasons,
			a."gen_ai.tool.call.id" AS tool_call_id, s.status_message
		FROM spans s, jsonb_to_record(CASE WHEN json_typeof(s.attributes) = 'object' THEN s.attributes::jsonb ELSE '{}' END)
			AS a("loupe.turn.index" text, "genkit:name" text, "genkit:type" text, "genkit:metadata:subtype" text,
				"genkit:state" text, "gen_ai.operation.name" text, "gen_ai.request.model" text,
				"gen_ai.tool.name" text, "gen_ai.usage.input_tokens" text, "gen_ai.usage.output_tokens" text,
				"genkit:output" text, "gen_ai.response.model" text, "gen_ai.response.finish_reasons" text,
				"gen_ai.tool.call.id" text)
		WHERE s.trace_id = $1 AND s.start_time_unix_nano BETWEEN $2 AND $3`, traceID, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("turn facts of trace %s: %w", traceID, err)
	}
	// Scanned by position, not by name: a large trace has tens of thousands of rows.
	var facts []SpanTurnFacts
	var f SpanTurnFacts
	_, err = pgx.ForEachRow(rows, []any{&f.SpanID, &f.ParentSpanID, &f.Name, &f.StartTime, &f.EndTime,
		&f.StatusCode, &f.TurnIndex, &f.GenkitName, &f.GenkitType, &f.Subtype, &f.State, &f.Operation,
		&f.Model, &f.ToolName, &f.InputTokens, &f.OutputTokens, &f.ModelOutput, &f.ResponseModel,
		&f.FinishReasons, &f.ToolCallID, &f.StatusMessage}, func() error {
		facts = append(facts, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("turn facts of trace %s: %w", traceID, err)
	}
	slices.SortFunc(facts, func(a, b SpanTurnFacts) int {
		if a.StartTime != b.StartTime {
			if a.StartTime < b.StartTime {
				return -1
			}
			return 1
		}
		return strings.Compare(a.SpanID, b.SpanID)
	})
	return facts, nil
}

// SpansRunningByRun returns the run's spans that are stored as running (their end not recorded).
func (s *Store) SpansRunningByRun(ctx context.Context, runID uuid.UUID) ([]Span, error) {
	rows, err := s.db.Query(ctx, `SELECT `+spanReadColumns+` FROM spans WHERE run_id = $1 AND end_time_unix_nano = 0`, runID)
	if err != nil {
		return nil, fmt.Errorf("running spans of run %s: %w", runID, err)
	}
	spans, err := appendSpansRaw(nil, rows)
	if err != nil {
		return nil, fmt.Errorf("running spans of run %s: %w", runID, err)
	}
	return spans, nil
}
