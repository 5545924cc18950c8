package server

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/store"
)

// traceListFilters reads the trace list's filters from a query, the same for the API
// (GET /api/v1/traces) and the traces page: name (exact), q (name contains), text (in the root
// span's name, input, output or other attributes), status (error: any span failed; interrupted:
// none did, the trace ended and stopped at a tool's interrupt (store.Trace.Interrupted); ok: none
// failed, the trace ended and is not interrupted; unset: its root has no status; running), source (loupe, genkit, otlp),
// service (service.name, exact), run_id, since and until (RFC 3339, Unix nanoseconds, or a
// duration ago such as 24h, on the start time), min_duration and max_duration (parseDuration; a
// running trace has none, so either leaves it out), and attr.KEY=VALUE (a root span attribute equals
// VALUE).
func traceListFilters(q url.Values) ([]store.TraceFilter, error) {
	var fs []store.TraceFilter
	add := func(field, op string, v any) {
		fs = append(fs, store.TraceFilter{Field: field, Op: op, Value: v})
	}
	if v := q.Get("name"); v != "" {
		add(store.TraceFieldName, store.FilterEq, v)
	}
	if v := strings.TrimSpace(q.Get("q")); v != "" {
		add(store.TraceFieldName, store.FilterContains, v)
	}
	if v := strings.TrimSpace(q.Get("text")); v != "" {
		add(store.TraceFieldText, store.FilterContains, v)
	}
	if v := q.Get("source"); v != "" {
		if !slices.Contains(store.SpanSources, v) {
			return nil, Errorf(http.StatusBadRequest, "bad_request", "source %q is not one of %s", v, strings.Join(store.SpanSources, ", "))
		}
		add(store.TraceFieldSource, store.FilterEq, v)
	}
	if v := q.Get("service"); v != "" {
		add(store.TraceFieldService, store.FilterEq, v)
	}
	if v := q.Get("run_id"); v != "" {
		if _, err := uuid.Parse(v); err != nil {
			return nil, Errorf(http.StatusBadRequest, "bad_request", "run_id %q is not a UUID", v)
		}
		add(store.TraceFieldRunID, store.FilterEq, v)
	}
	for param, op := range map[string]string{"min_duration": store.FilterGte, "max_duration": store.FilterLte} {
		if v := strings.TrimSpace(q.Get(param)); v != "" {
			d, err := parseDuration(v)
			if err != nil {
				return nil, Errorf(http.StatusBadRequest, "bad_request", "%s %q: want a duration such as 250ms, 1.5s or 2m (a bare number is milliseconds)", param, v)
			}
			add(store.TraceFieldDuration, op, int64(d))
		}
	}
	switch v := q.Get("status"); v {
	case "":
	case "running":
		add(store.TraceFieldRunning, store.FilterEq, true)
	case "error":
		add(store.TraceFieldFailed, store.FilterEq, true)
	case "ok":
		add(store.TraceFieldFailed, store.FilterEq, false)
		add(store.TraceFieldRunning, store.FilterEq, false)
		add(store.TraceFieldInterrupted, store.FilterEq, false)
	case "interrupted":
		add(store.TraceFieldFailed, store.FilterEq, false)
		add(store.TraceFieldRunning, store.FilterEq, false)
		add(store.TraceFieldInterrupted, store.FilterEq, true)
	case "unset":
		add(store.TraceFieldStatus, store.FilterEq, int64(store.StatusUnset))
		add(store.TraceFieldFailed, store.FilterEq, false)
		add(store.TraceFieldRunning, store.FilterEq, false)
	default:
		return nil, Errorf(http.StatusBadRequest, "bad_request", "status %q is not one of ok, error, interrupted, unset, running", v)
	}
	for param, op := range map[string]string{"since": store.FilterGte, "until": store.FilterLt} {
		if v := q.Get(param); v != "" {
			n, err := parseTime(v)
			if err != nil {
				return nil, Errorf(http.StatusBadRequest, "bad_request", "%s %q: want an RFC 3339 time, Unix nanoseconds, or a duration ago such as 24h", param, v)
			}
			add(store.TraceFieldStart, op, n)
		}
	}
	for key, vals := range q {
		if attr, ok := strings.CutPrefix(key, "attr."); ok {
			if attr == "" {
				return nil, Errorf(http.StatusBadRequest, "bad_request", "attr.: name the root span attribute, as in attr.env=prod")
			}
			if vals[0] != "" {
				add(attr, store.FilterEq, vals[0])
			}
		}
	}
	return fs, nil
}

// parseDuration reads a trace-list duration bound: Go's syntax (250ms, 1.5s, 2m, 300us), or a bare
// number of milliseconds, as a person types it into the traces page's filter.
func parseDuration(v string) (time.Duration, error) {
	if ms, err := strconv.ParseFloat(v, 64); err == nil {
		if ms < 0 || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
			return 0, fmt.Errorf("duration %q out of range", v)
		}
		return time.Duration(ms * float64(time.Millisecond)), nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		return 0, fmt.Errorf("duration %q is negative", v)
	}
	return d, err
}

// traceListSort reads sort (start, duration, spans or tokens) and dir (asc or desc, the default).
func traceListSort(q url.Values) (store.TraceSort, bool, error) {
	sort := store.TraceSort(q.Get("sort"))
	if sort != "" && !slices.Contains(store.TraceSorts, sort) {
		return "", false, Errorf(http.StatusBadRequest, "bad_request", "sort %q is not one of start, duration, spans, tokens", sort)
	}
	switch d := q.Get("dir"); d {
	case "", "desc":
		return sort, false, nil
	case "asc":
		return sort, true, nil
	}
	return "", false, Errorf(http.StatusBadRequest, "bad_request", "dir %q is not asc or desc", q.Get("dir"))
}
