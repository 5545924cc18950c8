package server

import (
	"bytes"
	"compress/gzip"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// checkIngest enforces the ingest token off loopback and refuses cross-site browser requests.
func (s *Server) checkIngest(c echo.Context) error {
	if site := c.Request().Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return Errorf(http.StatusForbidden, "forbidden", "trace ingest refuses cross-site browser requests")
	}
	return s.checkTelemetryToken(c, "trace ingest")
}

// checkTelemetryToken lets a request through on a loopback server, from a signed-in user (an API
// token, or for reads a session), or with LOUPE_INGEST_TOKEN; what names the refused action.
func (s *Server) checkTelemetryToken(c echo.Context, what string) error {
	if CheckLoopback(s.cfg.Addr) == nil {
		return nil
	}
	if p := principal(c); p != nil && !p.Local {
		return nil
	}
	want := s.deps.Traces.IngestToken()
	if want == "" {
		return Errorf(http.StatusUnauthorized, "unauthenticated",
			"%s needs a user's API token (devui user token <username>): the server is not bound to loopback and LOUPE_INGEST_TOKEN is not set", what)
	}
	got, ok := bearerToken(c.Request())
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return Errorf(http.StatusUnauthorized, "unauthenticated", "%s needs Authorization: Bearer <LOUPE_INGEST_TOKEN>", what)
	}
	return nil
}

// readIngestBody reads the body, gunzipping it when Content-Encoding says so, within the ingest
// limit both before and after decompression.
func (s *Server) readIngestBody(c echo.Context) ([]byte, error) {
	limit := s.deps.Traces.MaxBodyBytes()
	r := c.Request()
	tooLarge := Errorf(http.StatusRequestEntityTooLarge, "too_large", "request body exceeds the ingest limit of %d bytes", limit)
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	body := http.MaxBytesReader(c.Response(), r.Body, limit)
	var rd io.Reader = body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, tooLarge
			}
			if bodyErr := s.bodyErrorOf(err); bodyErr != nil {
				return nil, bodyErr
			}
			return nil, Errorf(http.StatusBadRequest, "bad_request", "malformed gzip body: %v", err)
		}
		defer gz.Close()
		rd = io.LimitReader(gz, limit+1)
	default:
		return nil, Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "unsupported Content-Encoding %q (want gzip or none)", enc)
	}
	// Read into a buffer sized from Content-Length when it is known (bytes.Buffer wants MinRead
	// bytes free to read into), instead of growing one from 512 bytes.
	size := int64(bytes.MinRead)
	if rd == io.Reader(body) && r.ContentLength > 0 {
		size += r.ContentLength
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(rd)
	data := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		if bodyErr := s.bodyErrorOf(err); bodyErr != nil {
			return nil, bodyErr
		}
		if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, Errorf(http.StatusBadRequest, "bad_request", "malformed gzip body: %v", err)
		}
		return nil, fmt.Errorf("read ingest body: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, Errorf(http.StatusRequestEntityTooLarge, "too_large", "decompressed body exceeds the ingest limit of %d bytes", limit)
	}
	return data, nil
}

// traceError maps the trace package's input errors to 400.
func traceError(err error) error {
	if trace.IsInputError(err) {
		return Errorf(http.StatusBadRequest, "bad_request", "%s", err.Error())
	}
	return err
}

// genkitTraceIngest is Genkit's POST /api/traces: one TraceData per request; it answers "OK".
func (s *Server) genkitTraceIngest(c echo.Context) error {
	if err := s.checkIngest(c); err != nil {
		s.deps.Traces.Reject(store.SpanSourceGenkit, "auth")
		return err
	}
	body, err := s.readIngestBody(c)
	if err != nil {
		s.deps.Traces.Reject(store.SpanSourceGenkit, "body")
		return err
	}
	if _, err := s.deps.Traces.IngestGenkit(c.Request().Context(), body); err != nil {
		return traceError(err)
	}
	return c.String(http.StatusOK, "OK")
}

// genkitTraceList is Genkit's GET /api/traces?limit=&continuationToken=&filter=.
func (s *Server) genkitTraceList(c echo.Context) error {
	if err := s.checkTelemetryToken(c, "reading traces"); err != nil {
		return err
	}
	p := trace.GenkitListParams{ContinuationToken: c.QueryParam("continuationToken"), Filter: c.QueryParam("filter")}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTraceListLimit {
			return Errorf(http.StatusBadRequest, "bad_request", "limit %q: want a number from 1 to %d", v, maxTraceListLimit)
		}
		p.Limit = n
	}
	resp, err := s.deps.Traces.GenkitList(c.Request().Context(), p)
	if err != nil {
		return traceError(err)
	}
	return c.JSON(http.StatusOK, resp)
}

// genkitTraceGet is Genkit's GET /api/traces/{id}.
func (s *Server) genkitTraceGet(c echo.Context) error {
	if err := s.checkTelemetryToken(c, "reading traces"); err != nil {
		return err
	}
	id, err := traceParam(c, "id")
	if err != nil {
		return err
	}
	td, err := s.deps.Traces.GenkitGet(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		// Genkit's telemetry server answers an unknown trace with 200 and no body (its store's
		// load gives undefined), which the genkit CLI and the Dev UI read as "not found".
		c.Response().Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		return c.NoContent(http.StatusOK)
	}
	if err != nil {
		return traceError(err)
	}
	return c.JSON(http.StatusOK, td)
}

// otlpTraceIngest is OTLP/HTTP's POST /v1/traces, protobuf or JSON, gzipped or not. Errors are
// answered as OTLP requires: a google.rpc.Status in the request's content type.
func (s *Server) otlpTraceIngest(c echo.Context) error {
	reqCT, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	ct := reqCT
	if ct != trace.ContentTypeJSON {
		ct = trace.ContentTypeProtobuf
	}
	if err := s.checkIngest(c); err != nil {
		s.deps.Traces.Reject(store.SpanSourceOTLP, "auth")
		return s.otlpError(c, ct, err)
	}
	if reqCT != trace.ContentTypeJSON && reqCT != trace.ContentTypeProtobuf {
		// OTLP/HTTP answers an unsupported Content-Type with 415.
		s.deps.Traces.Reject(store.SpanSourceOTLP, "content_type")
		return s.otlpError(c, ct, Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type",
			"Content-Type %q: want %s or %s", c.Request().Header.Get("Content-Type"), trace.ContentTypeProtobuf, trace.ContentTypeJSON))
	}
	body, err := s.readIngestBody(c)
	if err != nil {
		s.deps.Traces.Reject(store.SpanSourceOTLP, "body")
		return s.otlpError(c, ct, err)
	}
	resp, err := s.deps.Traces.IngestOTLP(c.Request().Context(), body, reqCT)
	if err != nil {
		if trace.IsInputError(err) {
			return s.otlpError(c, ct, traceError(err))
		}
		return err
	}
	return c.Blob(http.StatusOK, ct, resp)
}

// otlpLogIngest is OTLP/HTTP's POST /v1/logs, with the checks, limits and error answers of
// otlpTraceIngest.
func (s *Server) otlpLogIngest(c echo.Context) error {
	reqCT, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	ct := reqCT
	if ct != trace.ContentTypeJSON {
		ct = trace.ContentTypeProtobuf
	}
	if err := s.checkIngest(c); err != nil {
		return s.otlpError(c, ct, err)
	}
	if reqCT != trace.ContentTypeJSON && reqCT != trace.ContentTypeProtobuf {
		return s.otlpError(c, ct, Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type",
			"Content-Type %q: want %s or %s", c.Request().Header.Get("Content-Type"), trace.ContentTypeProtobuf, trace.ContentTypeJSON))
	}
	body, err := s.readIngestBody(c)
	if err != nil {
		return s.otlpError(c, ct, err)
	}
	resp, err := s.deps.Traces.IngestOTLPLogs(c.Request().Context(), body, reqCT)
	if err != nil {
		if trace.IsInputError(err) {
			return s.otlpError(c, ct, traceError(err))
		}
		return err
	}
	return c.Blob(http.StatusOK, ct, resp)
}

// genkitOTLPIngest is Genkit's telemetry server's POST /api/otlp (and its /api/otlp/v1/traces and
// /api/otlp/v1/logs): OTLP/JSON holding resourceSpans, resourceLogs or both. Genkit JS sends its
// logger's records there (its LogServerExporter posts them to $GENKIT_TELEMETRY_SERVER/api/otlp),
// not to OTLP's /v1/logs. It answers {} as Genkit's server does; a payload with neither is
// acknowledged and ignored, as there.
func (s *Server) genkitOTLPIngest(c echo.Context) error {
	if err := s.checkIngest(c); err != nil {
		return err
	}
	body, err := s.readIngestBody(c)
	if err != nil {
		return err
	}
	var parts struct {
		ResourceSpans []json.RawMessage `json:"resourceSpans"`
		ResourceLogs  []json.RawMessage `json:"resourceLogs"`
	}
	if err := json.Unmarshal(body, &parts); err != nil {
		return Errorf(http.StatusBadRequest, "bad_request", "malformed OTLP JSON: %v", err)
	}
	ctx := c.Request().Context()
	if len(parts.ResourceSpans) > 0 {
		if _, err := s.deps.Traces.IngestOTLP(ctx, body, trace.ContentTypeJSON); err != nil {
			return traceError(err)
		}
	}
	if len(parts.ResourceLogs) > 0 {
		if _, err := s.deps.Traces.IngestOTLPLogs(ctx, body, trace.ContentTypeJSON); err != nil {
			return traceError(err)
		}
	}
	return c.JSON(http.StatusOK, struct{}{})
}

// otlpError writes a client error as an OTLP Status; server errors go to the central handler.
func (s *Server) otlpError(c echo.Context, ct string, err error) error {
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		return err
	}
	code := int32(3) // INVALID_ARGUMENT
	switch apiErr.Status {
	case http.StatusUnauthorized:
		code = 16 // UNAUTHENTICATED
	case http.StatusForbidden:
		code = 7 // PERMISSION_DENIED
	case http.StatusRequestEntityTooLarge:
		code = 8 // RESOURCE_EXHAUSTED
	case http.StatusUnsupportedMediaType:
		code = 12 // UNIMPLEMENTED
	}
	st := &status.Status{Code: code, Message: apiErr.Message}
	var (
		b    []byte
		merr error
	)
	if ct == trace.ContentTypeJSON {
		b, merr = protojson.Marshal(st)
	} else {
		b, merr = proto.Marshal(st)
	}
	if merr != nil {
		return err
	}
	s.log.Warn("otlp ingest refused", "status", apiErr.Status, "err", apiErr.Message)
	return c.Blob(apiErr.Status, ct, b)
}

// apiTraceList is GET /api/v1/traces: trace summaries newest first.
//
// Parameters: limit (1 to 1000, default 50), cursor (next_cursor of the previous page, in the same
// order), sort and dir (traceListSort), the filters of traceListFilters, and filter (Genkit's
// filter JSON, with start and end in ms).
func (s *Server) apiTraceList(c echo.Context) error {
	p := store.TraceListParams{}
	q := c.QueryParams()
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTraceListLimit {
			return Errorf(http.StatusBadRequest, "bad_request", "limit %q: want a number from 1 to %d", v, maxTraceListLimit)
		}
		p.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		cur, err := store.ParseTraceCursor(v)
		if err != nil {
			return Errorf(http.StatusBadRequest, "bad_request", "%v", err)
		}
		p.After = cur
	}
	fs, err := traceListFilters(q)
	if err != nil {
		return err
	}
	p.Filters = fs
	if p.Sort, p.Asc, err = traceListSort(q); err != nil {
		return err
	}
	if v := q.Get("filter"); v != "" {
		fs, err := trace.ParseGenkitFilter(v)
		if err != nil {
			return traceError(err)
		}
		p.Filters = append(p.Filters, fs...)
	}
	traces, next, err := s.deps.Traces.List(c.Request().Context(), p)
	if err != nil {
		return traceError(err)
	}
	resp := struct {
		Traces     []*apiTrace `json:"traces"`
		NextCursor *string     `json:"next_cursor"`
	}{Traces: apiTracesOf(traces)}
	if next != nil {
		cur := next.String()
		resp.NextCursor = &cur
	}
	return c.JSON(http.StatusOK, resp)
}

// maxTraceListLimit caps a page of GET /api/v1/traces and GET /api/traces.
const maxTraceListLimit = 1000

// parseTime accepts Unix nanoseconds, RFC 3339, or a duration before now ("24h"), as the runs
// list does.
func parseTime(v string) (int64, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, nil
	}
	t, err := parseSince(v)
	if err != nil {
		return 0, err
	}
	return t.UnixNano(), nil
}

// apiTraceGet is GET /api/v1/traces/{id}: the trace as a span tree, each span's stored JSON
// (attributes, events, links, resource) sent as stored; with ?download, as a file. With fields=skeleton the spans come
// without those payloads, each with its payload_bytes, for a client that then fetches the spans it
// shows (apiTraceSpan). The answer is gzipped when the client accepts it (writeTraceJSON).
func (s *Server) apiTraceGet(c echo.Context) error {
	id, err := traceParam(c, "id")
	if err != nil {
		return err
	}
	var tree *trace.Tree
	switch f := c.QueryParam("fields"); f {
	case "", "all":
		tree, err = s.deps.Traces.Tree(c.Request().Context(), id)
	case "skeleton":
		tree, err = s.deps.Traces.Skeleton(c.Request().Context(), id)
	default:
		return Errorf(http.StatusBadRequest, "bad_request", "fields %q is not one of all, skeleton", f)
	}
	if err != nil {
		return traceError(err)
	}
	if _, ok := c.QueryParams()["download"]; ok {
		attachment(c, "trace-"+tree.Trace.TraceID+".json")
	}
	if _, pretty := c.QueryParams()["pretty"]; pretty {
		return c.JSON(http.StatusOK, tree)
	}
	return s.writeTraceJSON(c, treeSize(tree), tree.WriteJSON)
}

// apiTraceOTLP is GET /api/v1/traces/{id}/otlp: the trace as an OTLP ExportTraceServiceRequest in
// OTLP/JSON, every span with its resource, scope, attributes, events and links, which POST
// /v1/traces (Loupe's or any OTLP collector's) takes back. With ?download it is sent as a file.
func (s *Server) apiTraceOTLP(c echo.Context) error {
	id, err := traceParam(c, "id")
	if err != nil {
		return err
	}
	b, err := s.deps.Traces.OTLPJSON(c.Request().Context(), id)
	if err != nil {
		return traceError(err)
	}
	if _, ok := c.QueryParams()["download"]; ok {
		attachment(c, "trace-"+id+".otlp.json")
	}
	return s.writeTraceJSON(c, len(b), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// attachment makes the answer a download named name.
func attachment(c echo.Context, name string) {
	c.Response().Header().Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": name}))
}

// apiTraceSpan is GET /api/v1/traces/{id}/spans/{span}: one span in full, payloads as stored, in
// the shape of a tree's node without children.
func (s *Server) apiTraceSpan(c echo.Context) error {
	id, err := traceParam(c, "id")
	if err != nil {
		return err
	}
	n, err := s.deps.Traces.Span(c.Request().Context(), id, c.Param("span"))
	if err != nil {
		return traceError(err)
	}
	if _, pretty := c.QueryParams()["pretty"]; pretty {
		n.Children = nil
		return c.JSON(http.StatusOK, n)
	}
	size := len(n.Attributes) + len(n.Events) + len(n.Links) + len(n.Resource) + 512
	return s.writeTraceJSON(c, size, func(w io.Writer) error { return trace.WriteSpanJSON(w, n) })
}

// apiTraceTurns is GET /api/v1/traces/{id}/turns: the per-turn summary.
func (s *Server) apiTraceTurns(c echo.Context) error {
	id, err := traceParam(c, "id")
	if err != nil {
		return err
	}
	turns, err := s.deps.Traces.Turns(c.Request().Context(), id)
	if err != nil {
		return traceError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"trace_id": id, "turns": turns})
}
