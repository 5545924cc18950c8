package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Trace is the summary row of one trace, kept up to date by SpanIngest. Its name, times and status
// are its root span's once the root has arrived; before that, the span-wide extremes.
type Trace struct {
	TraceID     string     `db:"trace_id" json:"trace_id"`
	DisplayName string     `db:"display_name" json:"display_name"`
	RootSpanID  *string    `db:"root_span_id" json:"root_span_id,omitempty"`
	StartTime   int64      `db:"start_time_unix_nano" json:"start_time_unix_nano"`
	EndTime     int64      `db:"end_time_unix_nano" json:"end_time_unix_nano"`
	StatusCode  int16      `db:"status_code" json:"status_code"`
	SpanCount   int        `db:"span_count" json:"span_count"`
	Source      string     `db:"source" json:"source"`
	RunID       *uuid.UUID `db:"run_id" json:"run_id,omitempty"`
	UpdatedAt   time.Time  `db:"updated_at" json:"updated_at"`
	// Service is the service.name of the program that sent the trace (OTLP's resource), when
	// known.
	Service string `db:"service" json:"service,omitempty"`
	// Model is the first model the trace called; the counts are its model calls, tokens, tool
	// calls and failed tool calls, folded at ingest (TraceUsageFold).
	Model        string `db:"model" json:"model,omitempty"`
	ModelCalls   int    `db:"model_calls" json:"model_calls"`
	InputTokens  int64  `db:"input_tokens" json:"input_tokens"`
	OutputTokens int64  `db:"output_tokens" json:"output_tokens"`
	ToolCalls    int    `db:"tool_calls" json:"tool_calls"`
	ToolErrors   int    `db:"tool_errors" json:"tool_errors"`
	// LastEnd is the latest end of any of its spans: a trace lasts from StartTime to there
	// (Duration).
	LastEnd int64 `db:"last_end_time_unix_nano" json:"last_end_time_unix_nano"`
	// ErrorSpans counts its failed spans, any of them: one is enough for the trace to be failed
	// (Failed).
	ErrorSpans int `db:"error_spans" json:"error_spans"`
	// Interrupted is a trace that stopped at a tool's interrupt and did not go on in itself: one of
	// its spans is interrupted (genkit:state), none failed, and no span resumes it
	// (loupe.link.type=resume). Genkit resumes in another trace, so its trace stays interrupted.
	Interrupted bool `db:"interrupted" json:"interrupted"`
}

// Failed reports whether any span of the trace failed, not only its root.
func (t *Trace) Failed() bool { return t.ErrorSpans > 0 || t.StatusCode == StatusError }

// Duration is how long a trace lasted: from its start to the latest end of any of its spans, as
// the span tree's header on the trace and run pages measures it. It is 0 while the root runs.
func (t *Trace) Duration() int64 {
	if t.EndTime == 0 {
		return 0
	}
	return max(t.LastEnd, t.EndTime) - t.StartTime
}

const traceColumns = `t.trace_id, t.display_name, t.root_span_id, t.start_time_unix_nano,
	t.end_time_unix_nano, t.status_code, t.span_count, t.source, t.run_id, t.updated_at, t.service,
	t.model, t.model_calls, t.input_tokens, t.output_tokens, t.tool_calls, t.tool_errors,
	t.last_end_time_unix_nano, t.error_spans, ` + traceInterruptedSQL + ` AS interrupted`

// traceInterruptedSQL is Trace.Interrupted in SQL, short of the failed check, which the list's
// status reads first. Its counts are kept at ingest (migration 00059), so neither the list nor
// its filters read a span.
const traceInterruptedSQL = `(t.interrupted_spans > 0 AND t.resume_spans = 0)`

// traceFailedSQL is Trace.Failed in SQL.
const traceFailedSQL = `(t.status_code = 2 OR t.error_spans > 0)`

// traceDurationSQL is Trace.Duration in SQL.
const traceDurationSQL = `(CASE WHEN t.end_time_unix_nano = 0 THEN 0
	ELSE GREATEST(t.last_end_time_unix_nano, t.end_time_unix_nano) - t.start_time_unix_nano END)`

// TraceGet returns one trace's summary.
func (s *Store) TraceGet(ctx context.Context, traceID string) (*Trace, error) {
	rows, err := s.db.Query(ctx, `SELECT `+traceColumns+` FROM traces t WHERE trace_id = $1`, traceID)
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	tr, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByPos[Trace])
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, notFound(err))
	}
	return tr, nil
}

// ErrInvalidFilter wraps every complaint about a TraceFilter: the caller's mistake, not the
// database's.
var ErrInvalidFilter = errors.New("invalid trace filter")

// TraceCursor is a keyset position in the trace list: the last row's sort value (its start time,
// in the default order) and id.
type TraceCursor struct {
	StartTime int64
	TraceID   string
}

// TraceSort is an order of the trace list; ties are broken by trace id.
type TraceSort string

// Trace-list orders.
const (
	TraceSortStart    TraceSort = "start" // the default: newest first
	TraceSortDuration TraceSort = "duration"
	TraceSortSpans    TraceSort = "spans"
	TraceSortTokens   TraceSort = "tokens"
)

// TraceSorts are the orders the trace list accepts.
var TraceSorts = []TraceSort{TraceSortStart, TraceSortDuration, TraceSortSpans, TraceSortTokens}

var traceSortSQL = map[TraceSort]string{
	TraceSortStart:    "t.start_time_unix_nano",
	TraceSortDuration: traceDurationSQL,
	TraceSortSpans:    "t.span_count::bigint",
	TraceSortTokens:   "(t.input_tokens + t.output_tokens)",
}

// String encodes the cursor for a URL.
func (c TraceCursor) String() string {
	return strconv.FormatInt(c.StartTime, 10) + "_" + c.TraceID
}

// ParseTraceCursor decodes TraceCursor.String.
func ParseTraceCursor(s string) (*TraceCursor, error) {
	start, id, ok := strings.Cut(s, "_")
	n, err := strconv.ParseInt(start, 10, 64)
	if !ok || err != nil || len(id) != 32 {
		return nil, fmt.Errorf("cursor %q is not one this server issued", s)
	}
	return &TraceCursor{StartTime: n, TraceID: id}, nil
}

// Filter operators for TraceFilter.
const (
	FilterEq       = "eq"
	FilterNeq      = "neq"
	FilterGt       = "gt"
	FilterGte      = "gte"
	FilterLt       = "lt"
	FilterLte      = "lte"
	FilterContains = "contains"
)

// Trace filter fields. Any other field names an attribute of the root span.
const (
	TraceFieldID      = "id"
	TraceFieldName    = "name"
	TraceFieldStart   = "start"  // Unix nanoseconds
	TraceFieldEnd     = "end"    // Unix nanoseconds
	TraceFieldStatus  = "status" // status code
	TraceFieldType    = "type"   // Genkit's: the root's genkit:metadata:subtype, else genkit:type, else UNKNOWN
	TraceFieldSource  = "source"
	TraceFieldRunning = "running" // value true or false
	// TraceFieldFailed is whether any span of the trace failed: value true or false.
	TraceFieldFailed = "failed"
	// TraceFieldRunID is the run a trace belongs to (eq or neq, a UUID string, or a list of them):
	// the summary's run_id (from its loupe.run.id), found along traces_run_idx, or an execution's
	// trace linked by RunTraceAdd; never by reading spans.
	TraceFieldRunID = "run_id"
	// TraceFieldInterrupted is Trace.Interrupted, the failed check aside: value true or false.
	TraceFieldInterrupted = "interrupted"
	// TraceFieldService is the service.name of the program that sent the trace.
	TraceFieldService = "service"
	// TraceFieldText is text in the root span's name, input, output or other attributes (contains
	// only).
	TraceFieldText = "text"
	// TraceFieldDuration is how long the trace lasted (Trace.Duration), in nanoseconds.
	TraceFieldDuration = "duration"
)

// TraceFilter is one condition on the trace list. Value is a string, an int64, a float64, a bool,
// or, for eq and neq, a []any of those meaning "any of".
type TraceFilter struct {
	Field string
	Op    string
	Value any
}

// TraceListParams filters and pages the trace list.
type TraceListParams struct {
	Filters []TraceFilter
	After   *TraceCursor // the last row of the previous page
	Limit   int          // default 50, at most 1000
	// WithRoot also returns each trace's root span, for Genkit's list, in one query.
	WithRoot bool
	// WithInput also returns the start of each trace's input (its root span's genkit:input, or
	// gen_ai.input.messages), for a preview.
	WithInput bool
	// Sort is the order, TraceSortStart by default; Asc makes it ascending (the default is
	// descending). After must come from a page in the same order.
	Sort TraceSort
	Asc  bool
}

// TraceListItem is one trace of the list, with its root span when asked for and present.
type TraceListItem struct {
	Trace
	Root *Span
	// sortValue is the row's value in the list's order, for the next page's cursor.
	sortValue int64
	// Input is the start of the trace's input when WithInput was asked, at most traceInputMax
	// characters.
	Input string
}

// traceInputMax is how much of a trace's input the list reads for its preview.
const traceInputMax = 2000

// TraceList returns traces newest first, and the cursor of the next page (nil on the last page).
func (s *Store) TraceList(ctx context.Context, p TraceListParams) ([]TraceListItem, *TraceCursor, error) {
	if p.Limit <= 0 {
		p.Limit = 50
	}
	p.Limit = min(p.Limit, 1000)
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	// A filter on the root's attributes joins the roots; without one, the roots asked for are
	// read after the page (traceListRoots), by key, in the partitions of the page's days only.
	joinRoot := false
	for _, f := range p.Filters {
		cond, root, err := traceFilterSQL(f, arg)
		if err != nil {
			return nil, nil, err
		}
		joinRoot = joinRoot || root
		where = append(where, cond)
	}
	if p.Sort == "" {
		p.Sort = TraceSortStart
	}
	key, ok := traceSortSQL[p.Sort]
	if !ok {
		return nil, nil, fmt.Errorf("%w: no order %q", ErrInvalidFilter, p.Sort)
	}
	cmp, dir := "<", "DESC"
	if p.Asc {
		cmp, dir = ">", "ASC"
	}
	if p.After != nil {
		where = append(where, fmt.Sprintf("(%s, t.trace_id) %s (%s, %s)", key, cmp,
			arg(p.After.StartTime), arg(p.After.TraceID)))
	}
	q := `SELECT ` + traceColumns + `, ` + key + ` AS sort_value, t.span_start_min_unix_nano, t.span_start_max_unix_nano`
	q += ` FROM traces t`
	if joinRoot {
		// Bounded by the summary's span start times, so that PostgreSQL reads each root in the
		// partitions of its trace's days only (pruned at run time: it still plans every one).
		q += ` LEFT JOIN spans r ON r.trace_id = t.trace_id AND r.span_id = t.root_span_id
			AND r.start_time_unix_nano BETWEEN t.span_start_min_unix_nano AND t.span_start_max_unix_nano`
	}
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY ` + key + ` ` + dir + `, t.trace_id ` + dir + ` LIMIT ` + arg(p.Limit+1)

	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list traces: %w", err)
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TraceListItem, error) {
		var it TraceListItem
		var spanLo, spanHi int64
		t := &it.Trace
		err := row.Scan(&t.TraceID, &t.DisplayName, &t.RootSpanID, &t.StartTime, &t.EndTime,
			&t.StatusCode, &t.SpanCount, &t.Source, &t.RunID, &t.UpdatedAt, &t.Service, &t.Model,
			&t.ModelCalls, &t.InputTokens, &t.OutputTokens, &t.ToolCalls, &t.ToolErrors, &t.LastEnd,
			&t.ErrorSpans, &t.Interrupted, &it.sortValue, &spanLo, &spanHi)
		if t.RootSpanID != nil {
			spanLo, spanHi = spanStartsOrAll(spanLo, spanHi)
			lo, hi = min(lo, spanLo), max(hi, spanHi)
		}
		return it, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list traces: %w", err)
	}
	var next *TraceCursor
	if len(items) > p.Limit {
		items = items[:p.Limit]
		last := items[len(items)-1]
		next = &TraceCursor{StartTime: last.sortValue, TraceID: last.TraceID}
	}
	if (p.WithRoot || p.WithInput) && lo <= hi {
		if err := s.traceListRoots(ctx, items, lo, hi, p.WithRoot); err != nil {
			return nil, nil, err
		}
	}
	return items, next, nil
}

// traceListRoots reads the root span of each of items that has one, into its Input and, if
// withRoot, its Root. lo and hi bound the start times of the items' spans, given as parameters so
// that PostgreSQL plans the read on the partitions of the page's days only: joined in the list's
// statement, the roots cost planning every partition of spans (18 ms at 404), whichever it read.
func (s *Store) traceListRoots(ctx context.Context, items []TraceListItem, lo, hi int64, withRoot bool) error {
	traceIDs, spanIDs := make([]string, 0, len(items)), make([]string, 0, len(items))
	at := make(map[string]int, len(items))
	for i := range items {
		if id := items[i].RootSpanID; id != nil {
			traceIDs, spanIDs = append(traceIDs, items[i].TraceID), append(spanIDs, *id)
			at[items[i].TraceID] = i
		}
	}
	payloads := `NULL::json, NULL::json, NULL::json, NULL::json`
	if withRoot {
		payloads = `attributes, events, links, resource`
	}
	rows, err := s.db.Query(ctx, `SELECT trace_id, span_id, parent_span_id, name, kind,
			start_time_unix_nano, end_time_unix_nano, status_code, status_message, `+payloads+`,
			scope, scope_version, source, run_id,
			COALESCE(left(COALESCE(attributes->>'genkit:input', attributes->>'gen_ai.input.messages'), `+
		strconv.Itoa(traceInputMax)+`), '')
		FROM spans WHERE (trace_id, span_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`+spanStartsBetween(3),
		traceIDs, spanIDs, lo, hi)
	if err != nil {
		return fmt.Errorf("list traces: roots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r     spanNullable
			input string
		)
		if err := rows.Scan(append(r.dest(), &input)...); err != nil {
			return fmt.Errorf("list traces: roots: %w", err)
		}
		i, ok := at[*r.traceID]
		if !ok || *items[i].RootSpanID != *r.spanID {
			continue
		}
		items[i].Input = input
		if withRoot {
			items[i].Root = r.span()
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list traces: roots: %w", err)
	}
	return nil
}

// spanNullable scans a span whose columns may be NULL (the list's roots, read without payloads).
type spanNullable struct {
	traceID, spanID, name, statusMessage, scope, scopeVersion, source *string
	parent                                                            *string
	kind, statusCode                                                  *int16
	start, end                                                        *int64
	attributes, events, links, resource                               []byte
	runID                                                             *uuid.UUID
}

func (n *spanNullable) dest() []any {
	return []any{&n.traceID, &n.spanID, &n.parent, &n.name, &n.kind, &n.start, &n.end,
		&n.statusCode, &n.statusMessage, &n.attributes, &n.events, &n.links, &n.resource, &n.scope,
		&n.scopeVersion, &n.source, &n.runID}
}

func (n *spanNullable) span() *Span {
	return &Span{TraceID: *n.traceID, SpanID: *n.spanID, ParentSpanID: n.parent, Name: *n.name,
		Kind: *n.kind, StartTime: *n.start, EndTime: *n.end, StatusCode: *n.statusCode,
		StatusMessage: *n.statusMessage, Attributes: n.attributes, Events: n.events, Links: n.links,
		Resource: n.resource, Scope: *n.scope, ScopeVersion: *n.scopeVersion, Source: *n.source,
		RunID: n.runID}
}

// truncateNames applies TruncateDisplayName to a filter's string values.
func truncateNames(v any) any {
	switch x := v.(type) {
	case string:
		return TruncateDisplayName(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = truncateNames(e)
		}
		return out
	}
	return v
}

// traceFilterSQL turns one filter into a condition, and reports whether it reads the root span.
func traceFilterSQL(f TraceFilter, arg func(any) string) (string, bool, error) {
	var (
		col     string
		numeric bool
		root    bool
	)
	switch f.Field {
	case TraceFieldID:
		col = "t.trace_id"
	case TraceFieldName:
		col = "t.display_name"
		if f.Op == FilterEq || f.Op == FilterNeq {
			f.Value = truncateNames(f.Value) // as the summary stores them
		}
	case TraceFieldSource:
		col = "t.source"
	case TraceFieldStart:
		col, numeric = "t.start_time_unix_nano", true
	case TraceFieldEnd:
		col, numeric = "t.end_time_unix_nano", true
	case TraceFieldStatus:
		col, numeric = "t.status_code", true
	case TraceFieldDuration:
		col, numeric = traceDurationSQL, true
	case TraceFieldRunID:
		return runIDFilterSQL(f, arg)
	case TraceFieldRunning:
		b, ok := f.Value.(bool)
		if !ok || (f.Op != FilterEq && f.Op != FilterNeq) {
			return "", false, fmt.Errorf("%w: filter running: want eq or neq with true or false", ErrInvalidFilter)
		}
		if f.Op == FilterNeq {
			b = !b
		}
		if b {
			return "t.end_time_unix_nano = 0", false, nil
		}
		return "t.end_time_unix_nano <> 0", false, nil
	case TraceFieldFailed:
		b, ok := f.Value.(bool)
		if !ok || (f.Op != FilterEq && f.Op != FilterNeq) {
			return "", false, fmt.Errorf("%w: filter failed: want eq or neq with true or false", ErrInvalidFilter)
		}
		if b == (f.Op == FilterEq) {
			return traceFailedSQL, false, nil
		}
		return "NOT " + traceFailedSQL, false, nil
	case TraceFieldInterrupted:
		b, ok := f.Value.(bool)
		if !ok || (f.Op != FilterEq && f.Op != FilterNeq) {
			return "", false, fmt.Errorf("%w: filter interrupted: want eq or neq with true or false", ErrInvalidFilter)
		}
		if b == (f.Op == FilterEq) {
			return traceInterruptedSQL, false, nil
		}
		return "NOT " + traceInterruptedSQL, false, nil
	case TraceFieldService:
		col = "t.service"
	case TraceFieldText:
		str, ok := f.Value.(string)
		if !ok || f.Op != FilterContains {
			return "", false, fmt.Errorf("%w: filter text: want contains with a string", ErrInvalidFilter)
		}
		v := arg(str)
		return fmt.Sprintf("(strpos(lower(t.display_name), lower(%s)) > 0 OR strpos(lower(r.attributes::text), lower(%s)) > 0)", v, v), true, nil
	case TraceFieldType:
		col, root = `COALESCE(r.attributes->>'genkit:metadata:subtype', r.attributes->>'genkit:type', 'UNKNOWN')`, true
	case "":
		return "", false, fmt.Errorf("%w: filter with an empty field name", ErrInvalidFilter)
	default:
		// An attribute of the root span, compared as text, or as a number for ordering.
		root = true
		key := arg(f.Field)
		col = "(r.attributes->>" + key + ")"
		if isOrdering(f.Op) {
			v, ok := toFloat(f.Value)
			if !ok {
				return "", false, fmt.Errorf("%w: filter %s %s: want a number", ErrInvalidFilter, f.Field, f.Op)
			}
			return fmt.Sprintf("(CASE WHEN json_typeof(r.attributes->%s) = 'number' THEN (r.attributes->>%s)::numeric %s %s ELSE false END)",
				key, key, sqlOp(f.Op), arg(v)), true, nil
		}
	}
	switch {
	case f.Op == FilterContains:
		str, ok := f.Value.(string)
		if !ok || numeric {
			return "", false, fmt.Errorf("%w: filter %s contains: want a string field and value", ErrInvalidFilter, f.Field)
		}
		return fmt.Sprintf("strpos(lower(%s), lower(%s)) > 0", col, arg(str)), root, nil
	case f.Op == FilterEq || f.Op == FilterNeq:
		vals, isList := f.Value.([]any)
		if !isList {
			vals = []any{f.Value}
		}
		if len(vals) == 0 {
			return "", false, fmt.Errorf("%w: filter %s %s: empty list", ErrInvalidFilter, f.Field, f.Op)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			p, err := filterValue(f.Field, v, numeric, arg)
			if err != nil {
				return "", false, err
			}
			parts[i] = p
		}
		in := col + " IN (" + strings.Join(parts, ", ") + ")"
		if f.Op == FilterNeq {
			return "(" + col + " IS NULL OR NOT " + in + ")", root, nil
		}
		return in, root, nil
	case isOrdering(f.Op):
		if !numeric {
			str, ok := f.Value.(string)
			if !ok {
				return "", false, fmt.Errorf("%w: filter %s %s: want a string", ErrInvalidFilter, f.Field, f.Op)
			}
			return fmt.Sprintf("%s %s %s", col, sqlOp(f.Op), arg(str)), root, nil
		}
		p, err := filterValue(f.Field, f.Value, true, arg)
		if err != nil {
			return "", false, err
		}
		return fmt.Sprintf("%s %s %s", col, sqlOp(f.Op), p), root, nil
	}
	return "", false, fmt.Errorf("%w: filter %s: unknown operator %q (want eq, neq, gt, gte, lt, lte or contains)", ErrInvalidFilter, f.Field, f.Op)
}

// runIDFilterSQL compares the summary's run_id with one run id or a list of them, as uuid, so that
// traces_run_idx serves it.
func runIDFilterSQL(f TraceFilter, arg func(any) string) (string, bool, error) {
	vals, isList := f.Value.([]any)
	if !isList {
		vals = []any{f.Value}
	}
	if (f.Op != FilterEq && f.Op != FilterNeq) || len(vals) == 0 {
		return "", false, fmt.Errorf("%w: filter run_id: want eq or neq with run ids", ErrInvalidFilter)
	}
	runIDs := make([]uuid.UUID, len(vals))
	for i, v := range vals {
		str, _ := v.(string)
		id, err := uuid.Parse(str)
		if err != nil {
			return "", false, fmt.Errorf("%w: filter run_id: %v is not a run id", ErrInvalidFilter, v)
		}
		runIDs[i] = id
	}
	v := arg(runIDs)
	// One list of the runs' trace ids, a union of two index reads (traces_run_idx, run_traces'
	// key), rather than an OR of the two: the planner cannot serve an OR from either index, and
	// walked every trace by start time with the OR as its filter.
	ids := "SELECT r.trace_id FROM traces r WHERE r.run_id = ANY(" + v + "::uuid[])" +
		" UNION SELECT rt.trace_id FROM run_traces rt WHERE rt.run_id = ANY(" + v + "::uuid[])"
	if f.Op == FilterNeq {
		return "t.trace_id NOT IN (" + ids + ")", false, nil
	}
	return "t.trace_id IN (" + ids + ")", false, nil
}

func isOrdering(op string) bool {
	return op == FilterGt || op == FilterGte || op == FilterLt || op == FilterLte
}

func sqlOp(op string) string {
	switch op {
	case FilterGt:
		return ">"
	case FilterGte:
		return ">="
	case FilterLt:
		return "<"
	case FilterLte:
		return "<="
	}
	return "="
}

func filterValue(field string, v any, numeric bool, arg func(any) string) (string, error) {
	if numeric {
		switch x := v.(type) {
		case int64:
			return arg(x), nil
		case int:
			return arg(int64(x)), nil
		case float64:
			return arg(int64(x)), nil
		}
		return "", fmt.Errorf("%w: filter %s: want a number, not %v", ErrInvalidFilter, field, v)
	}
	switch x := v.(type) {
	case string:
		return arg(x), nil
	case int64:
		return arg(strconv.FormatInt(x, 10)), nil
	case int:
		return arg(strconv.Itoa(x)), nil
	case float64:
		return arg(strconv.FormatFloat(x, 'f', -1, 64)), nil
	case bool:
		return arg(strconv.FormatBool(x)), nil
	}
	return "", fmt.Errorf("%w: filter %s: unsupported value %v", ErrInvalidFilter, field, v)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return 0, false
}

// TraceDeleteParams selects traces for retention. A trace qualifies when it started before
// OlderThan (Unix nanoseconds; 0 disables the rule), or when it lies at or beyond Beyond in newest
// first order (TraceSpanCutoff finds that position for a cap on spans; nil disables the rule).
// Traces of a run that is interrupted, or that a replay or a fork refers to, never qualify.
type TraceDeleteParams struct {
	OlderThan int64
	Beyond    *TraceCursor
	Limit     int // traces per batch, default 100
	// DropFrom and DropTo, when DropTo > DropFrom, say that every day partition of spans within
	// [DropFrom, DropTo) is about to be dropped whole (SpanPartitionDrop): a batch then leaves the
	// deleted traces' spans there to the drop and deletes only their other spans, row by row.
	DropFrom, DropTo int64
}

// TraceSpanCutoff returns the newest trace that lies beyond the newest keepSpans spans, counting
// traces newest first: it and every older trace exceed the cap. When every span fits there is none:
// the error wraps ErrNotFound.
// It reads the traces newest first and stops there, so its cost grows with what is kept, not with
// the table.
func (s *Store) TraceSpanCutoff(ctx context.Context, keepSpans int64) (*TraceCursor, error) {
	var c TraceCursor
	err := s.db.QueryRow(ctx, `
		SELECT start_time_unix_nano, trace_id FROM (
			SELECT start_time_unix_nano, trace_id,
				sum(span_count) OVER (ORDER BY start_time_unix_nano DESC, trace_id DESC) AS newer_spans
			FROM traces ORDER BY start_time_unix_nano DESC, trace_id DESC
		) c
		WHERE newer_spans > $1 LIMIT 1`, keepSpans).Scan(&c.StartTime, &c.TraceID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("trace span cutoff: every span fits: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("trace span cutoff: %w", err)
	}
	return &c, nil
}

// TraceDeleteBatch deletes one batch of qualifying traces, oldest first, spans first, in one short
// transaction, and returns how many traces it deleted and how many spans they had (their
// span_count). Call it until it deletes nothing.
func (s *Store) TraceDeleteBatch(ctx context.Context, p TraceDeleteParams) (traces, spans int64, err error) {
	if p.OlderThan == 0 && p.Beyond == nil {
		return 0, 0, nil
	}
	if p.Limit <= 0 {
		p.Limit = 100
	}
	var beyondStart int64
	var beyondID string
	if p.Beyond != nil {
		beyondStart, beyondID = p.Beyond.StartTime, p.Beyond.TraceID
	}
	// Oldest first along traces_start_idx, so that a batch reads little more than what it deletes.
	q := `
		SELECT t.trace_id FROM traces t
		WHERE (($1::bigint > 0 AND t.start_time_unix_nano < $1::bigint)
			OR ($2::bool AND (t.start_time_unix_nano < $3::bigint
				OR (t.start_time_unix_nano = $3::bigint AND t.trace_id <= $4::text))))
		AND NOT EXISTS (
			SELECT 1 FROM runs r
			WHERE (r.id = t.run_id OR r.trace_id = t.trace_id)
			AND (r.status = 'interrupted'
				OR EXISTS (SELECT 1 FROM runs d WHERE d.replay_of = r.id OR d.fork_of = r.id))
		)
		ORDER BY t.start_time_unix_nano, t.trace_id
		LIMIT $5`
	err = s.WithTx(ctx, func(tx *Store) error {
		rows, err := tx.db.Query(ctx, q, p.OlderThan, p.Beyond != nil, beyondStart, beyondID, p.Limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		if p.DropTo > p.DropFrom {
			// Partition pruning keeps the statement out of the partitions about to be dropped;
			// spans_default may hold spans of that time too (a day that had no partition).
			if _, err := tx.db.Exec(ctx, `DELETE FROM spans WHERE trace_id = ANY($1)
				AND (start_time_unix_nano < $2 OR start_time_unix_nano >= $3)`, ids, p.DropFrom, p.DropTo); err != nil {
				return err
			}
			if _, err := tx.db.Exec(ctx, `DELETE FROM spans_default WHERE trace_id = ANY($1)
				AND start_time_unix_nano >= $2 AND start_time_unix_nano < $3`, ids, p.DropFrom, p.DropTo); err != nil {
				return err
			}
		} else if _, err := tx.db.Exec(ctx, `DELETE FROM spans WHERE trace_id = ANY($1)`, ids); err != nil {
			return err
		}
		// A trace's logs go with it (logs_trace_idx).
		if _, err := tx.db.Exec(ctx, `DELETE FROM logs WHERE trace_id = ANY($1)`, ids); err != nil {
			return err
		}
		// Spans are counted from the summaries, whether their rows went now or go with a partition.
		return tx.db.QueryRow(ctx, `WITH d AS (DELETE FROM traces WHERE trace_id = ANY($1) RETURNING span_count)
			SELECT count(*), COALESCE(sum(span_count), 0) FROM d`, ids).Scan(&traces, &spans)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("delete expired traces: %w", err)
	}
	return traces, spans, nil
}
