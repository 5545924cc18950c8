package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// bindJSON decodes a JSON request body into v (see decodeJSON).
func bindJSON(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// decodeJSON decodes a JSON body strictly: unknown fields and trailing data are errors that name
// the problem (400), and so is text that PostgreSQL cannot store anywhere in the body (422 with
// details.field, such as input/destination), since every API body reaches the database.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return Errorf(http.StatusBadRequest, "bad_request", "the request needs a JSON body")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(http.StatusBadRequest, "bad_json", "invalid JSON body: %v", err)
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "bad_json", "invalid JSON body: data after the JSON value")
	}
	return unstorableJSON(store.CheckJSON("", body))
}

// unstorableJSON turns CheckJSON's *store.TextError into a 422 naming the field, as a schema
// error does; nil stays nil.
func unstorableJSON(err error) error {
	var te *store.TextError
	if !errors.As(err, &te) {
		return err
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: te.Error(),
		Details: map[string]string{"field": te.Field}}
}

// runsError maps the run service's errors to API errors.
func runsError(err error) error {
	var ve *runs.ValidationError
	var ce *runs.ConflictError
	var unknown *runs.UnknownActionError
	switch {
	case errors.As(err, &ve):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: ve.Error(),
			Details: map[string]string{"field": ve.Field}}
	case errors.As(err, &ce):
		d := map[string]any{"status": ce.Interrupt.Status, "version": ce.Interrupt.Version}
		if ce.Interrupt.ResolvedBy != nil {
			d["resolved_by"] = *ce.Interrupt.ResolvedBy
		}
		if ce.Interrupt.ResolvedAt != nil {
			d["resolved_at"] = ce.Interrupt.ResolvedAt
		}
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: ce.Error(), Details: d}
	case errors.Is(err, runs.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	case errors.Is(err, runs.ErrForbidden):
		return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: err.Error()}
	case errors.As(err, &unknown):
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error() + " (GET /api/v1/actions lists the actions)",
			Details: map[string]any{"field": "action"}}
	case errors.Is(err, runs.ErrInvalid):
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	}
	return err
}

// runStartRequest is the body of POST /api/v1/runs.
type runStartRequest struct {
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input"`
	// Context is the run's action context, a JSON object (Genkit's runAction context).
	Context json.RawMessage `json:"context,omitempty"`
}

func (s *Server) apiRunStart(c echo.Context) error {
	var req runStartRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	run, err := s.deps.Runs.StartRun(c.Request().Context(), runs.StartParams{
		Action: req.Action, Input: req.Input, Context: req.Context, CreatedBy: principal(c).Username,
	})
	if err != nil {
		return runsError(err)
	}
	return c.JSON(http.StatusCreated, apiRunOf(run, s.prices))
}

func (s *Server) apiRunList(c echo.Context) error {
	p, err := runListParams(c)
	if err != nil {
		return err
	}
	p.Prices = s.prices
	list, next, err := s.store.RunList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	resp := map[string]any{"runs": apiRunsOf(list, s.prices), "next_cursor": nil}
	if list == nil {
		resp["runs"] = []*apiRun{}
	}
	if next != nil {
		resp["next_cursor"] = encodeCursor(next)
	}
	return c.JSON(http.StatusOK, resp)
}

// runListParams reads the runs list's filters and order, rejecting malformed ones by name: the
// error is a 400 whose details name the field, which the page shows beside it.
func runListParams(c echo.Context) (store.RunListParams, error) {
	q := c.QueryParams()
	p := store.RunListParams{Status: q.Get("status"), Action: q.Get("action"), Model: q.Get("model"), Query: q.Get("q"), Session: q.Get("session"), Thread: q.Get("thread")}
	bad := func(field, format string, args ...any) error {
		e := Errorf(http.StatusBadRequest, "bad_request", "%s "+format, append([]any{field}, args...)...)
		e.Details = map[string]any{"field": field}
		return e
	}
	if p.Status != "" && !validRunStatus(p.Status) {
		return p, bad("status", "%q: want one of %s", p.Status, strings.Join(store.RunStatuses, ", "))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return p, bad("limit", "%q: want a number from 1 to 500", v)
		}
		p.Limit = n
	}
	for _, name := range []string{"since", "until"} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, err := parseSince(v)
		if err != nil {
			return p, bad(name, "%q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago such as 24h or 90m", v)
		}
		if name == "since" {
			p.Since = t
		} else {
			p.Until = t
		}
	}
	if v := q.Get("sort"); v != "" {
		if !slices.Contains(store.RunSorts, store.RunSort(v)) {
			names := make([]string, len(store.RunSorts))
			for i, s := range store.RunSorts {
				names[i] = string(s)
			}
			return p, bad("sort", "%q: want one of %s", v, strings.Join(names, ", "))
		}
		p.Sort = store.RunSort(v)
	}
	switch q.Get("dir") {
	case "", "desc":
	case "asc":
		p.Asc = true
	default:
		return p, bad("dir", "%q: want asc or desc", q.Get("dir"))
	}
	if v := q.Get("cursor"); v != "" {
		cur, err := decodeCursor(v)
		if err != nil {
			return p, bad("cursor", "%q is not one this server issued", v)
		}
		sort := p.Sort
		if sort == "" {
			sort = store.RunSortStarted
		}
		if cur.Sort != sort || cur.Asc != p.Asc {
			return p, bad("cursor", "belongs to the order %s, not to %s", cur.Sort, sort)
		}
		p.After = cur
	}
	return p, nil
}

func validRunStatus(s string) bool {
	for _, st := range store.RunStatuses {
		if s == st {
			return true
		}
	}
	return false
}

// parseSince accepts RFC 3339 or a duration before now ("24h", "90m").
func parseSince(v string) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d), nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

// encodeCursor is a runs-list cursor as the API and the page hand it out: the order, its
// direction, the last row's sort value and its id.
func encodeCursor(c *store.RunCursor) string {
	dir := "desc"
	if c.Asc {
		dir = "asc"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(string(c.Sort) + "|" + dir + "|" + c.ID.String() + "|" + c.Value))
}

// decodeCursor reads a cursor of encodeCursor, or of earlier releases (created_at|id, newest
// first).
func decodeCursor(v string) (*store.RunCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, err
	}
	parts := strings.SplitN(string(raw), "|", 4)
	switch len(parts) {
	case 2:
		t, id, err := decodeTimeCursor(v)
		if err != nil {
			return nil, err
		}
		return &store.RunCursor{Sort: store.RunSortStarted, Value: t.Format(time.RFC3339Nano), ID: id}, nil
	case 4:
		u, err := uuid.Parse(parts[2])
		if err != nil {
			return nil, err
		}
		if parts[1] != "asc" && parts[1] != "desc" {
			return nil, fmt.Errorf("cursor direction %q", parts[1])
		}
		return &store.RunCursor{Sort: store.RunSort(parts[0]), Asc: parts[1] == "asc", ID: u, Value: parts[3]}, nil
	}
	return nil, fmt.Errorf("cursor with %d parts", len(parts))
}

// encodeTimeCursor is a cursor over a list ordered by creation time and id (interrupts).
func encodeTimeCursor(t time.Time, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "|" + id.String()))
}

func decodeTimeCursor(v string) (time.Time, uuid.UUID, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return time.Time{}, uuid.Nil, fmt.Errorf("cursor without separator")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	return t, u, nil
}

// apiRunDetail is GET /api/v1/runs/{id}: a run with its history, interrupts and ledger.
type apiRunDetail struct {
	*apiRun
	Messages   []*apiMessage   `json:"messages"`
	Interrupts []*apiInterrupt `json:"interrupts"`
	ToolCalls  []*apiToolCall  `json:"tool_calls"`
	// WaitingReason says why a queued run is not executing: no live worker has its action.
	WaitingReason string `json:"waiting_reason,omitempty"`
}

func (s *Server) runDetail(c echo.Context, id uuid.UUID) (*apiRunDetail, error) {
	ctx := c.Request().Context()
	run, err := s.store.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &apiRunDetail{apiRun: apiRunOf(run, s.prices)}
	msgs, err := s.store.MessageList(ctx, id)
	if err != nil {
		return nil, err
	}
	its, err := s.store.InterruptListByRun(ctx, id)
	if err != nil {
		return nil, err
	}
	calls, err := s.store.ToolCallList(ctx, id)
	if err != nil {
		return nil, err
	}
	d.Messages, d.Interrupts, d.ToolCalls = apiMessagesOf(msgs), apiInterruptsOf(its), apiToolCallsOf(calls)
	if s.deps.Runs != nil {
		if d.WaitingReason, err = s.deps.Runs.WaitingReason(ctx, run); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (s *Server) apiRunGet(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	d, err := s.runDetail(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) apiRunChunks(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	var after int64
	if v := c.QueryParam("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return Errorf(http.StatusBadRequest, "bad_request", "after %q: want a sequence number (0 or more)", v)
		}
	}
	limit := 0 // as many as the store gives at once
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 10000 {
			return Errorf(http.StatusBadRequest, "bad_request", "limit %q: want a number of chunks from 1 to 10000", v)
		}
	}
	if _, err := s.store.RunGet(c.Request().Context(), id); err != nil {
		return err
	}
	chunks, err := s.store.ChunkList(c.Request().Context(), id, after, limit)
	if err != nil {
		return err
	}
	out := apiChunksOf(chunks)
	if out == nil {
		out = []*apiChunk{}
	}
	return c.JSON(http.StatusOK, map[string]any{"chunks": out})
}

func (s *Server) apiRunCancel(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	run, err := s.deps.Runs.Cancel(c.Request().Context(), id, principal(c).Username)
	if err != nil {
		return runsError(err)
	}
	return c.JSON(http.StatusOK, apiRunOf(run, s.prices))
}

func (s *Server) apiInterruptList(c echo.Context) error {
	q := c.QueryParams()
	// Pending by default, as `devui interrupts list` does; status=all (or an empty status=, the
	// CLI's "empty for all") lists every status.
	status := store.InterruptPending
	if vs, ok := q["status"]; ok {
		status = vs[0]
	}
	if status == "all" {
		status = ""
	}
	switch status {
	case "", store.InterruptPending, store.InterruptApproved, store.InterruptEdited, store.InterruptResponded, store.InterruptDenied, store.InterruptCancelled:
	default:
		return Errorf(http.StatusBadRequest, "bad_request", "status %q: want pending (the default), approved, edited, responded, denied, cancelled or all", status)
	}
	p := store.InterruptListParams{Status: status, Tool: q.Get("tool"), Action: q.Get("action"), Limit: store.InterruptListLimit}
	switch q.Get("for") {
	case "":
	case "me":
		p.For = decidingUser(c)
	default:
		return Errorf(http.StatusBadRequest, "bad_request", "for %q: want me (the interrupts you may decide now), or leave it out", q.Get("for"))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.InterruptListMax {
			return Errorf(http.StatusBadRequest, "bad_request", "limit %q: want a number from 1 to %d", v, store.InterruptListMax)
		}
		p.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		at, id, err := decodeTimeCursor(v)
		if err != nil {
			return Errorf(http.StatusBadRequest, "bad_request", "cursor %q is not one this server issued", v)
		}
		p.After = &store.InterruptCursor{CreatedAt: at, ID: id}
	}
	// One more than the page, to know whether another follows.
	want := p.Limit
	p.Limit++
	list, err := s.store.InterruptList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	resp := struct {
		Interrupts []*apiInterrupt `json:"interrupts"`
		NextCursor *string         `json:"next_cursor"`
	}{Interrupts: []*apiInterrupt{}}
	if len(list) > want {
		last := list[want-1]
		cur := encodeTimeCursor(last.CreatedAt, last.ID)
		resp.NextCursor = &cur
		list = list[:want]
	}
	for _, it := range list {
		resp.Interrupts = append(resp.Interrupts, apiInterruptOf(&it.Interrupt))
	}
	return c.JSON(http.StatusOK, resp)
}

func (s *Server) apiInterruptGet(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	it, err := s.store.InterruptGet(c.Request().Context(), id, false)
	if err != nil {
		return err
	}
	audit, err := s.store.AuditList(c.Request().Context(), "interrupt", id.String())
	if err != nil {
		return err
	}
	deliveries, err := s.store.WebhookDeliveryList(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"interrupt": apiInterruptOf(it), "audit": apiAuditOf(audit),
		"webhook_deliveries": apiWebhookDeliveriesOf(deliveries)})
}

func (s *Server) apiInterruptResolve(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	req, err := decodeResolve(body)
	if err != nil {
		return err
	}
	it, err := s.deps.Runs.Resolve(c.Request().Context(), runs.ResolveParams{
		InterruptID: id, Action: req.Action, Input: req.Input, Output: req.Output,
		Comment: req.Comment, Version: req.Version, Actor: principal(c).Username, Decider: decider(c),
	})
	if err != nil {
		return runsError(err)
	}
	return c.JSON(http.StatusOK, apiInterruptOf(it))
}

// resolveRequest is the body of POST /api/v1/interrupts/{id}/resolve.
type resolveRequest struct {
	Action  string          `json:"action"`
	Input   json.RawMessage `json:"input"`
	Output  json.RawMessage `json:"output"`
	Comment string          `json:"comment"`
	Version int64           `json:"version"`
}

// decodeResolve decodes a resolve body (see decodeJSON) and refuses what the run service would
// otherwise drop: approving takes neither input nor output.
func decodeResolve(body []byte) (resolveRequest, error) {
	var req resolveRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	if req.Action == runs.ActionApprove && (len(req.Input) > 0 || len(req.Output) > 0) {
		// Approving runs the call as the model asked; changed arguments would otherwise be dropped.
		field := "input"
		if len(req.Input) == 0 {
			field = "output"
		}
		return req, &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Details: map[string]any{"field": field},
			Message: "approve runs the call as asked and takes no " + field + `: use "edit" to change the arguments, or "respond" to answer for the tool`}
	}
	return req, nil
}

// apiActionList is GET /api/v1/actions: this program's actions and those live workers announce.
func (s *Server) apiActionList(c echo.Context) error {
	list, err := s.deps.Runs.Actions(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"actions": list})
}
