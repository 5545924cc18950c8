package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// runsPage is GET /runs: the runs table with filters, sortable columns and keyset paging. A
// filter that is not understood is shown beside its field, with the form as it was sent (400).
func (s *Server) runsPage(c echo.Context) error {
	ctx := c.Request().Context()
	q := c.QueryParams()
	page := templates.RunsPage{
		Page: s.page(c, "Runs", "runs"),
		Filter: templates.RunFilter{Status: q.Get("status"), Action: q.Get("action"), Model: q.Get("model"), Query: q.Get("q"), Since: q.Get("since"),
			Until: q.Get("until"), Session: q.Get("session"), Thread: q.Get("thread")},
		Statuses: store.RunStatuses,
		Actions:  s.actionKeys(c.Request().Context(), "flow"),
	}
	p, err := runListParams(c)
	var bad *Error
	if errors.As(err, &bad) && bad.Status == http.StatusBadRequest {
		page.Error = bad.Message
		if d, ok := bad.Details.(map[string]any); ok {
			page.FieldError, _ = d["field"].(string)
		}
		page.Sorts = runSortLinks(q, store.RunSortStarted, false)
		return s.render(c, http.StatusBadRequest, templates.RunsView(page))
	}
	if err != nil {
		return err
	}
	if p.Limit == 0 {
		p.Limit = 50
	}
	p.Prices = s.prices
	list, next, err := s.reads.RunList(ctx, p)
	if err != nil {
		return err
	}
	sort := p.Sort
	if sort == "" {
		sort = store.RunSortStarted
	}
	page.Sorts = runSortLinks(q, sort, p.Asc)
	page.Live = q.Get("cursor") == "" && q.Get("status") == "" && q.Get("action") == "" && q.Get("model") == "" && q.Get("q") == "" &&
		q.Get("session") == "" && q.Get("thread") == "" &&
		q.Get("until") == "" && sort == store.RunSortStarted && !p.Asc
	ids := make([]uuid.UUID, len(list))
	for i, r := range list {
		ids[i] = r.ID
	}
	pending, err := s.reads.InterruptCountPendingByRuns(ctx, ids)
	if err != nil {
		return err
	}
	sessions, err := s.reads.RunSessions(ctx, ids)
	if err != nil {
		return err
	}
	for _, r := range list {
		row := s.runListRow(r, pending[r.ID])
		if c, ok := sessions[r.ID]; ok {
			row.Session, row.Thread, row.SessionURL = c.Session, c.Thread, conversationURL(c.Session, c.Thread)
		}
		page.Sessions = page.Sessions || row.Session != ""
		page.Rows = append(page.Rows, row)
	}
	page.Grouped = q.Get("group") == "session"
	toggle := url.Values{}
	for k, vals := range q {
		if k != "group" && k != "cursor" && len(vals) > 0 && vals[0] != "" {
			toggle.Set(k, vals[0])
		}
	}
	if !page.Grouped {
		toggle.Set("group", "session")
	}
	page.GroupURL = "/runs?" + toggle.Encode()
	if page.Grouped {
		page.Groups = groupBySession(page.Rows)
	}
	if next != nil {
		v := url.Values{}
		for k, vals := range q {
			if k != "cursor" && len(vals) > 0 && vals[0] != "" {
				v.Set(k, vals[0])
			}
		}
		v.Set("cursor", encodeCursor(next))
		page.NextURL = "/runs?" + v.Encode()
	}
	return s.render(c, http.StatusOK, templates.RunsView(page))
}

// runsCompare is GET /runs/compare?run=A&run=B, the runs list's "compare the two selected": it
// sends to the compare page of exactly two runs.
func (s *Server) runsCompare(c echo.Context) error {
	picked := c.QueryParams()["run"]
	if len(picked) != 2 {
		return Errorf(http.StatusBadRequest, "bad_request", "pick exactly two runs to compare; %d picked", len(picked))
	}
	var ids [2]uuid.UUID
	for i, v := range picked {
		id, err := uuid.Parse(v)
		if err != nil {
			return Errorf(http.StatusBadRequest, "bad_id", "run %q is not a run id", v)
		}
		ids[i] = id
	}
	return c.Redirect(http.StatusSeeOther, "/runs/"+ids[0].String()+"/diff/"+ids[1].String())
}

// groupBySession sorts a page's runs into their conversations (a session, and its thread where
// the runs name one: Genkit's threads of one session are conversations of their own), in the
// order each first appears (the list's order), the runs without one last.
func groupBySession(rows []templates.RunListRow) []templates.RunGroup {
	var groups []templates.RunGroup
	type conversation struct{ session, thread string }
	at := map[conversation]int{}
	var none []templates.RunListRow
	for _, r := range rows {
		if r.Session == "" {
			none = append(none, r)
			continue
		}
		key := conversation{r.Session, r.Thread}
		i, ok := at[key]
		if !ok {
			i = len(groups)
			at[key] = i
			groups = append(groups, templates.RunGroup{Session: r.Session, Thread: r.Thread, URL: conversationURL(r.Session, r.Thread)})
		}
		groups[i].Rows = append(groups[i].Rows, r)
	}
	if len(none) > 0 {
		groups = append(groups, templates.RunGroup{Rows: none})
	}
	return groups
}

// conversationURL is the runs list of one conversation: a session, or one thread of it.
func conversationURL(session, thread string) string {
	v := url.Values{"session": {session}}
	if thread != "" {
		v.Set("thread", thread)
	}
	return "/runs?" + v.Encode()
}

// runSortColumns are the runs table's sortable columns (every column but the compare tick) and
// the order each sorts by; a column sorts newest, largest or last first on the first click, and
// the other way on the next.
var runSortColumns = map[string]store.RunSort{
	"started": store.RunSortStarted, "status": store.RunSortStatus, "action": store.RunSortAction,
	"turns": store.RunSortTurns, "tokens": store.RunSortTokens, "ran": store.RunSortRanFor, "waited": store.RunSortWaited,
	"model": store.RunSortModel, "id": store.RunSortID, "input": store.RunSortInput, "pending": store.RunSortPending,
	"cost": store.RunSortCost,
}

// runSortLinks builds the header links: each keeps the filters and starts from the first page.
func runSortLinks(q url.Values, sort store.RunSort, asc bool) map[string]templates.RunSortLink {
	out := make(map[string]templates.RunSortLink, len(runSortColumns))
	for col, by := range runSortColumns {
		v := url.Values{}
		for k, vals := range q {
			if k != "cursor" && k != "sort" && k != "dir" && len(vals) > 0 && vals[0] != "" {
				v.Set(k, vals[0])
			}
		}
		l := templates.RunSortLink{}
		nextAsc := false
		if by == sort {
			l.Dir = "desc"
			if asc {
				l.Dir = "asc"
			}
			nextAsc = !asc
		}
		if by != store.RunSortStarted || nextAsc {
			v.Set("sort", string(by))
		}
		if nextAsc {
			v.Set("dir", "asc")
		}
		l.URL = "/runs"
		if len(v) > 0 {
			l.URL += "?" + v.Encode()
		}
		out[col] = l
	}
	return out
}

// runRow is GET /runs/{id}/row: one runs-table row, for runs that appear live.
func (s *Server) runRow(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	run, err := s.store.RunGet(ctx, id)
	if err != nil {
		return err
	}
	n, err := s.store.InterruptCountPendingByRun(ctx, id)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.RunRowView(s.runListRow(run, n)))
}

func (s *Server) runListRow(r *store.Run, pending int) templates.RunListRow {
	row := templates.RunListRow{ID: r.ID.String(), Action: r.Action, Status: r.Status, Model: deref(r.Model),
		Turns: r.Turns, Tokens: r.InputTokens + r.OutputTokens, Duration: runDuration(r), CreatedAt: r.CreatedAt, Pending: pending,
		Input: store.Shorten(compactJSON(r.Input), 80), Cost: costText(s.runCost(r)), CostTitle: pricesOf(s.prices, r.Usage)}
	if w := runWaited(r); w > 0 {
		row.Waited = fmtNanos(w.Nanoseconds())
	}
	now := time.Now()
	row.Ago = humanAge(max(now.Sub(r.CreatedAt), 0)) + " ago"
	queued := now.Sub(r.CreatedAt)
	if r.StartedAt != nil {
		queued = r.StartedAt.Sub(r.CreatedAt)
	}
	// Under 10 ms is starting at once, not a queue to speak of.
	if queued >= 10*time.Millisecond && (r.StartedAt != nil || r.Status == store.RunQueued) {
		row.Queued = fmtNanos(queued.Nanoseconds())
	}
	if r.Status == store.RunFailed || r.Status == store.RunAborted {
		row.Error = runErrorMessage(r.Error)
	}
	switch {
	case r.ForkOf != nil:
		row.Lineage = "fork"
	case r.ReplayOf != nil:
		row.Lineage = "replay"
	}
	return row
}

// runDuration is how long a run has run ("ran for"), its waits for reviewers left out: from its
// start until it finished, until now while it runs, and, while it waits for a reviewer, until it
// was interrupted. The runs list sorts by the same measure (store.RunSortRanFor).
func runDuration(r *store.Run) string {
	if r.StartedAt == nil {
		return ""
	}
	end := time.Now()
	switch {
	case r.FinishedAt != nil:
		end = *r.FinishedAt
	case r.Status == store.RunInterrupted:
		end = runWaitingSince(r)
	}
	ran := end.Sub(*r.StartedAt) - time.Duration(r.WaitedMs)*time.Millisecond
	return fmtNanos(max(ran, 0).Nanoseconds())
}

// runWaited is how long a run has waited for reviewers, its current wait included.
func runWaited(r *store.Run) time.Duration {
	w := time.Duration(r.WaitedMs) * time.Millisecond
	if r.Status == store.RunInterrupted {
		w += max(time.Since(runWaitingSince(r)), 0)
	}
	return w
}

// runWaitingSince is when an interrupted run stopped to wait: the run is not updated while it
// waits, so its last update is the interrupt.
func runWaitingSince(r *store.Run) time.Time {
	return r.UpdatedAt
}

// actionKeys lists the keys of the actions of a type ("" for all) that runs can be started for.
func (s *Server) actionKeys(ctx context.Context, typ string) []string {
	if s.deps.Runs == nil {
		return nil
	}
	var out []string
	for _, a := range s.actions(ctx) {
		if typ == "" || string(a.Type) == typ {
			out = append(out, a.Key)
		}
	}
	return out
}

// runPageData builds what the run page shows: the header, and the tab's own content, its long
// lists a page at a time. Only the whole page (not its sections' fragment) has the trace or the
// stream.
func (s *Server) runPageData(c echo.Context, id uuid.UUID, whole bool) (templates.RunPage, error) {
	ctx := c.Request().Context()
	r, err := s.store.RunGet(ctx, id)
	if err != nil {
		return templates.RunPage{}, err
	}
	p := templates.RunPage{Page: s.page(c, "Run "+shortUUID(id)+" · "+r.Action, "runs"), Models: s.actionKeys(ctx, "model"), Tab: runTab(c)}
	pr := principal(c)
	p.Run = templates.RunHeader{
		ID: r.ID.String(), Action: r.Action, Status: r.Status, Finished: store.RunFinished(r.Status), Model: deref(r.Model), Duration: runDuration(r),
		Turns: r.Turns, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CreatedBy: deref(r.CreatedBy),
		CreatedAt: r.CreatedAt, ReplayMode: deref(r.ReplayMode), Resumes: r.Resumes,
		InputJSON: nonEmptyJSON(r.Input), OutputJSON: nonEmptyJSON(r.Output), ErrorJSON: nonEmptyJSON(r.Error), ErrorMessage: runErrorMessage(r.Error), TickFrom: runTickFrom(r),
		CanCancel: s.deps.Runs != nil && !store.RunFinished(r.Status) && pr != nil && auth.Allows(pr.Role, store.RoleReviewer),
		CanReplay: s.deps.Runs != nil && (store.RunFinished(r.Status) || r.Status == store.RunInterrupted) && pr != nil && auth.Allows(pr.Role, store.RoleReviewer),
	}
	if r.Usage != nil {
		p.Run.Cost, p.Run.CostTitle = costText(s.runCost(r)), pricesOf(s.prices, r.Usage)
	}
	if r.Status == store.RunInterrupted && r.StartedAt != nil {
		since := runWaitingSince(r)
		p.Run.WaitingSince = &since
	}
	if r.WaitedMs > 0 {
		p.Run.Waited = fmtNanos(r.WaitedMs * int64(time.Millisecond))
	}
	if s.deps.Runs != nil {
		if p.Run.WaitingReason, err = s.deps.Runs.WaitingReason(ctx, r); err != nil {
			return p, err
		}
	}
	if r.ReplayOf != nil {
		p.Run.ReplayOf = r.ReplayOf.String()
	}
	if r.ForkOf != nil {
		p.Run.ForkOf = r.ForkOf.String()
		if r.ForkTurn != nil {
			p.Run.ForkTurn = strconv.Itoa(*r.ForkTurn)
		}
	}
	if err := s.runLineage(ctx, &p.Run, r); err != nil {
		return p, err
	}
	if p.Interrupts, err = s.runInterruptViews(ctx, r); err != nil {
		return p, err
	}
	if err := s.runLists(c, &p, whole); err != nil { // pages_run_lists.go
		return p, err
	}
	if whole && p.Tab == "trace" {
		if p.Trace, err = s.runTrace(c, r); err != nil && !errors.Is(err, errNoRunTrace) {
			return p, err
		}
		if p.Trace != nil {
			p.Logs = s.logLines(c.Request().Context(), p.Trace.TraceID, "")
		}
	}
	return p, nil
}

// runInterruptViews are the views of a run's interrupts, with their audit entries.
func (s *Server) runInterruptViews(ctx context.Context, r *store.Run) ([]templates.InterruptView, error) {
	list, err := s.store.InterruptListByRun(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, 0, len(list))
	for _, it := range list {
		ids = append(ids, it.ID)
	}
	audits, err := s.store.AuditListByInterrupts(ctx, ids)
	if err != nil {
		return nil, err
	}
	views := make([]templates.InterruptView, 0, len(list))
	for _, it := range list {
		views = append(views, s.interruptView(it, r.Action, audits[it.ID]))
	}
	return views, nil
}

// runLineage fills in the header's lineage: the divergence of a replay from its original, and the
// replays and forks of the run.
func (s *Server) runLineage(ctx context.Context, h *templates.RunHeader, r *store.Run) error {
	switch {
	case h.ReplayOf != "":
		h.CompareWith = h.ReplayOf
	case h.ForkOf != "":
		h.CompareWith = h.ForkOf
	}
	l, err := s.store.RunLineage(ctx, r.ID)
	if err != nil {
		return err
	}
	if h.ForkTurn != "" {
		rp, err := s.store.ReplayGet(ctx, r.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if rp != nil {
			h.ForkEdits = forkEdits(rp.Edits)
		}
	}
	if l.Of != nil {
		h.Divergence = divergenceView(l.Of.Divergence)
		h.Matches = h.Divergence == nil && deref(r.ReplayMode) == store.ReplayExact && store.RunFinished(r.Status)
	}
	for _, d := range l.Derived {
		v := templates.DerivedRun{ID: d.RunID.String(), Relation: d.Relation, Mode: deref(d.Mode), Status: d.Status}
		if d.ForkTurn != nil {
			v.ForkTurn = strconv.Itoa(*d.ForkTurn)
		}
		if dv := divergenceView(d.Divergence); dv != nil {
			v.Diverged = "diverged at turn " + strconv.Itoa(dv.Turn)
		} else if v.Mode == store.ReplayExact && store.RunFinished(d.Status) {
			v.Diverged = "matches"
		}
		h.Derived = append(h.Derived, v)
	}
	return nil
}

// forkEdits says what a fork's edits changed, one line an edit: the tool output of a turn's call,
// or a message of the history, with the new value shortened.
func forkEdits(raw json.RawMessage) []string {
	var edits []runs.Edit
	if len(raw) == 0 || json.Unmarshal(raw, &edits) != nil {
		return nil
	}
	out := make([]string, 0, len(edits))
	for _, e := range edits {
		switch {
		case e.Turn != nil:
			out = append(out, fmt.Sprintf("tool output of %s in turn %d set to %s", e.Ref, *e.Turn, store.Shorten(compactJSON(e.Output), 120)))
		case e.Seq != nil:
			var m struct {
				Role string `json:"role"`
			}
			_ = json.Unmarshal(e.Message, &m)
			out = append(out, fmt.Sprintf("message %d (%s) replaced: %s", *e.Seq, m.Role, store.Shorten(compactJSON(e.Message), 120)))
		}
	}
	return out
}

// maxDivergenceValue is how much of a divergence's values the run page shows.
const maxDivergenceValue = 200

// divergenceView reads a stored divergence (runs.Divergence); nil when there is none.
func divergenceView(raw json.RawMessage) *templates.DivergenceView {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var d struct {
		Turn     int             `json:"turn"`
		Part     string          `json:"part"`
		Ref      string          `json:"ref"`
		Tool     string          `json:"tool"`
		Path     string          `json:"path"`
		Original json.RawMessage `json:"original"`
		Replay   json.RawMessage `json:"replay"`
		Message  string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return &templates.DivergenceView{Turn: -1, Part: "unknown", Message: store.Shorten(string(raw), maxDivergenceValue)}
	}
	return &templates.DivergenceView{Turn: d.Turn, Part: d.Part, Ref: d.Ref, Tool: d.Tool, Path: d.Path,
		Original: divergenceValue(d.Original), Replay: divergenceValue(d.Replay), Message: d.Message}
}

// divergenceValue shows one side of a divergence: a string as itself, other JSON compactly; an
// absent value as "—".
func divergenceValue(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "—"
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return store.Shorten(strconv.Quote(str), maxDivergenceValue)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return store.Shorten(buf.String(), maxDivergenceValue)
	}
	return store.Shorten(string(raw), maxDivergenceValue)
}

// errNoRunTrace is runTrace's answer for a run with no trace recorded yet; the page says so.
var errNoRunTrace = errors.New("no trace recorded for the run")

// runTrace finds the run's traces (one per execution: a resumed run has several) and builds the
// tree of the one asked for, the newest by default.
func (s *Server) runTrace(c echo.Context, r *store.Run) (*templates.TraceView, error) {
	ctx := c.Request().Context()
	items, _, err := s.reads.TraceList(ctx, store.TraceListParams{Limit: 50,
		Filters: []store.TraceFilter{{Field: store.TraceFieldRunID, Op: store.FilterEq, Value: r.ID.String()}}})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(items)+1)
	for i := len(items) - 1; i >= 0; i-- { // oldest first
		ids = append(ids, items[i].TraceID)
	}
	if r.TraceID != nil && !slices.Contains(ids, *r.TraceID) {
		ids = append(ids, *r.TraceID)
	}
	if len(ids) == 0 {
		return nil, errNoRunTrace
	}
	current := ids[len(ids)-1]
	if want := c.QueryParam("trace"); want != "" && slices.Contains(ids, want) {
		current = want
	}
	base := "/runs/" + r.ID.String()
	link := base + "?"
	if current != ids[len(ids)-1] {
		link += "trace=" + current + "&"
	}
	link += "span="
	turn := -1
	if v := c.QueryParam("turn"); v != "" {
		turn, _ = strconv.Atoi(v)
	}
	v, err := s.traceView(ctx, current, link, c.QueryParam("span"), c.QueryParam("tool"), turn, treeStateFrom(c))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoRunTrace
	}
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		label := "execution " + strconv.Itoa(i+1)
		v.Others = append(v.Others, templates.TraceRef{ID: id, Label: label, Current: id == current, URL: base + "?trace=" + id})
	}
	return v, nil
}

// runPage is GET /runs/{id}[?span=|?tool=&turn=][&trace=]: the run detail page.
func (s *Server) runPage(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	p, err := s.runPageData(c, id, true)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.RunView(p))
}

// runTab is the run page's tab named by ?tab=; the trace when none or an unknown one is named. A
// deep link to a span (?span=, ?tool=) is a link into the trace.
func runTab(c echo.Context) string {
	t := c.QueryParam("tab")
	if slices.Contains(templates.RunTabs, t) {
		return t
	}
	return "trace"
}

// runSections is GET /runs/{id}/sections: the parts of the run page that change while it runs.
func (s *Server) runSections(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	p, err := s.runPageData(c, id, false)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.RunSections(p))
}

// runTraceFragment is GET /runs/{id}/trace[?trace=][&span=][&open=&closed=]: the run page's trace
// section as an HTML fragment, which the live script reloads as the run goes.
func (s *Server) runTraceFragment(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	r, err := s.store.RunGet(c.Request().Context(), id)
	if err != nil {
		return err
	}
	v, err := s.runTrace(c, r)
	if err != nil && !errors.Is(err, errNoRunTrace) {
		return err
	}
	return s.render(c, http.StatusOK, templates.RunTraceSection(v))
}

// runCancelForm is POST /runs/{id}/cancel from the run page.
func (s *Server) runCancelForm(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	if _, err := s.deps.Runs.Cancel(c.Request().Context(), id, principal(c).Username); err != nil {
		return runsError(err)
	}
	return c.Redirect(http.StatusSeeOther, "/runs/"+id.String())
}

// runReplayForm is POST /runs/{id}/replay from the run page: an exact replay, a re-execution, or
// a fork from a turn. It opens the new run's page.
func (s *Server) runReplayForm(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	p, err := replayFormParams(c)
	if err != nil {
		return err
	}
	p.RunID, p.CreatedBy = id, principal(c).Username
	run, err := s.deps.Runs.Replay(c.Request().Context(), p)
	if err != nil {
		return runsError(err)
	}
	return c.Redirect(http.StatusSeeOther, "/runs/"+run.ID.String())
}

// replayFormParams reads the run page's replay menu. Anything live (tools that act again, a
// re-run, a fork) needs its confirm box ticked: without it the answer is 422 and nothing starts.
// Empty override and edit fields are left out.
func replayFormParams(c echo.Context) (runs.ReplayParams, error) {
	p := runs.ReplayParams{Mode: c.FormValue("mode")}
	invalid := func(field, format string, args ...any) error {
		e := Errorf(http.StatusUnprocessableEntity, "invalid", "%s: "+format, append([]any{field}, args...)...)
		e.Details = map[string]any{"field": field}
		return e
	}
	live := p.Mode != store.ReplayExact
	if p.Mode == store.ReplayExact {
		p.Tools = c.FormValue("tools") // the page offers the recording (its default) or live tools
		live = p.Tools == store.ReplayToolsLive
		p.ApplyResolutions = c.FormValue("apply_resolutions") == "on"
	}
	if live && c.FormValue("confirm") != "yes" {
		return p, invalid("confirm", "this replay calls the live model or runs tools again, so their side effects happen again; tick the box that says you understand, and submit again")
	}
	if p.Mode == store.ReplayFork {
		turn, err := strconv.Atoi(c.FormValue("turn"))
		if err != nil || turn < 0 {
			return p, Errorf(http.StatusBadRequest, "bad_request", "turn %q: want a turn number", c.FormValue("turn"))
		}
		p.Turn = &turn
		if call := c.FormValue("edit_call"); call != "" {
			t, ref, ok := strings.Cut(call, "/")
			et, err := strconv.Atoi(t)
			if !ok || err != nil {
				return p, invalid("edit_call", "%q is not a turn/ref of the run's tool calls", call)
			}
			out := strings.TrimSpace(c.FormValue("edit_output"))
			if !json.Valid([]byte(out)) {
				return p, invalid("edit_output", "the new tool output must be JSON (a string in quotes: \"typhoon\")")
			}
			p.Edits = append(p.Edits, runs.Edit{Turn: &et, Ref: ref, Output: json.RawMessage(out)})
		}
		if v := strings.TrimSpace(c.FormValue("edit_seq")); v != "" {
			seq, err := strconv.Atoi(v)
			if err != nil || seq < 0 {
				return p, invalid("edit_seq", "%q: want a message position", v)
			}
			msg := strings.TrimSpace(c.FormValue("edit_message"))
			if !json.Valid([]byte(msg)) {
				return p, invalid("edit_message", "the new message must be JSON, as {\"role\":\"user\",\"content\":[{\"text\":\"…\"}]}")
			}
			p.Edits = append(p.Edits, runs.Edit{Seq: &seq, Message: json.RawMessage(msg)})
		}
	}
	if p.Mode == store.ReplayRerun || p.Mode == store.ReplayFork {
		o := &runs.Overrides{Model: strings.TrimSpace(c.FormValue("model"))}
		if v := c.FormValue("system"); strings.TrimSpace(v) != "" {
			o.System = &v
		}
		if v := strings.TrimSpace(c.FormValue("max_turns")); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return p, invalid("max_turns", "%q: want a whole number", v)
			}
			o.MaxTurns = &n
		}
		if v := strings.TrimSpace(c.FormValue("config")); v != "" {
			if !json.Valid([]byte(v)) {
				return p, invalid("config", "the model config must be a JSON object, as {\"temperature\":0.2}")
			}
			o.Config = json.RawMessage(v)
		}
		if o.Model != "" || o.System != nil || o.MaxTurns != nil || o.Config != nil {
			p.Overrides = o
		}
	}
	return p, nil
}

// interruptView builds an interrupt's view, with the audit entries given.
func (s *Server) interruptView(it *store.Interrupt, action string, audit []*store.AuditEntry) templates.InterruptView {
	v := templates.InterruptView{
		ID: it.ID.String(), RunID: it.RunID.String(), Action: action, Turn: it.Turn, Tool: it.Tool, Ref: it.Ref,
		Status: it.Status, Prompt: interruptMessage(it.Metadata), InputJSON: prettyJSON(it.Input),
		MetadataJSON: nonEmptyJSON(it.Metadata), InputSchema: compactJSON(it.InputSchema), OutputSchema: compactJSON(it.OutputSchema),
		CreatedAt: it.CreatedAt, Age: humanAge(time.Since(it.CreatedAt)), Version: it.Version,
		ResolvedBy: deref(it.ResolvedBy), ResolvedAt: it.ResolvedAt, Comment: deref(it.Comment), Resolution: nonEmptyJSON(it.Resolution),
		SpanURL: "/runs/" + it.RunID.String() + "?tool=" + url.QueryEscape(it.Tool) + "&turn=" + strconv.Itoa(it.Turn) + "#trace",
	}
	for _, a := range audit {
		v.Audit = append(v.Audit, templates.AuditRow{At: a.At, Actor: a.Actor, Action: a.Action, Details: prettyJSON(a.Details)})
	}
	v.Suggested = suggestedDecision(it.SuggestedResolution)
	return v
}

// suggestedDecision reads the original run's decision that a replay stored on an interrupt it
// raised again (see store.InterruptSuggest); nil when there is none or it cannot be read.
func suggestedDecision(raw json.RawMessage) *templates.SuggestedDecision {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s struct {
		SourceRunID string          `json:"source_run_id"`
		Status      string          `json:"status"`
		ResolvedBy  string          `json:"resolved_by"`
		ResolvedAt  *time.Time      `json:"resolved_at"`
		Comment     string          `json:"comment"`
		Resolution  json.RawMessage `json:"resolution"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.Status == "" {
		return nil
	}
	return &templates.SuggestedDecision{SourceRunID: s.SourceRunID, Status: s.Status, By: s.ResolvedBy, At: s.ResolvedAt,
		Comment: s.Comment, Resolution: nonEmptyJSON(s.Resolution)}
}

// interruptMessage picks the question out of interrupt metadata ({"message": ...}), or shows the
// metadata itself.
func interruptMessage(metadata []byte) string {
	var m map[string]any
	if json.Unmarshal(metadata, &m) == nil {
		for _, k := range []string{"message", "prompt", "question", "reason"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
	}
	return interruptPrompt(metadata)
}

// ledgerRow is a tool call of the ledger. it, when not nil, is the interrupt the call raised: a
// call that a reviewer answered or denied instead of running reads as their decision ("denied
// by rita"), not as a completed call, and a call run after an approval says who approved it.
func ledgerRow(tc *store.ToolCall, it *templates.InterruptView) templates.LedgerRow {
	l := templates.LedgerRow{Turn: tc.Turn, Ref: tc.Ref, Tool: tc.Tool, Status: tc.Status, Source: tc.Source, Attempt: tc.Attempt,
		Input: nonEmptyJSON(tc.Input), Output: nonEmptyJSON(tc.Output), Error: nonEmptyJSON(tc.Error)}
	by := func(verb string) string {
		if it.ResolvedBy == "" {
			return verb + " by a reviewer"
		}
		return verb + " by " + it.ResolvedBy
	}
	switch tc.Source {
	case store.ToolSourceExecuted:
		l.Label = "executed"
	case store.ToolSourceReexecuted:
		l.Label = "re-executed after recovery"
	case store.ToolSourceReused:
		l.Label = "reused (pendingOutput)"
	case store.ToolSourceReviewer:
		l.Label = "answered by a reviewer"
	default:
		l.Label = tc.Source
	}
	if it != nil {
		switch {
		case tc.Source == store.ToolSourceReviewer && it.Status == store.InterruptDenied:
			l.Status, l.Label = store.InterruptDenied, by("denied")+": the tool did not run"
		case tc.Source == store.ToolSourceReviewer && it.Status == store.InterruptResponded:
			l.Status, l.Label = store.InterruptResponded, by("answered")+": the tool did not run"
		case it.Status == store.InterruptApproved || it.Status == store.InterruptEdited:
			l.Label += ", " + by(it.Status)
		}
	}
	if tc.FinishedAt != nil {
		l.Duration = fmtNanos(tc.FinishedAt.Sub(tc.StartedAt).Nanoseconds())
	}
	return l
}

// conversation renders a run's history part by part; interrupted tool requests carry their
// interrupt. upTo, when not negative, stops after that message sequence.
func conversation(msgs []*store.RunMessage, interrupts []templates.InterruptView, upTo int) []templates.ConvMessage {
	byRef := map[string]*templates.InterruptView{}
	for i := range interrupts {
		it := &interrupts[i]
		byRef[strconv.Itoa(it.Turn)+"/"+it.Tool+"/"+it.Ref] = it
		if _, ok := byRef[it.Tool+"/"+it.Ref]; !ok {
			byRef[it.Tool+"/"+it.Ref] = it
		}
	}
	out := make([]templates.ConvMessage, 0, len(msgs))
	for _, m := range msgs {
		if upTo >= 0 && m.Seq > upTo {
			break
		}
		var body struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		}
		cm := templates.ConvMessage{Seq: m.Seq, Turn: m.Turn, Role: m.Role}
		if err := json.Unmarshal(m.Content, &body); err != nil {
			cm.Parts = []templates.ConvPart{{Kind: "data", JSON: prettyJSON(m.Content)}}
			out = append(out, cm)
			continue
		}
		for _, raw := range body.Content {
			cm.Parts = append(cm.Parts, convPart(raw, m.Turn, byRef))
		}
		out = append(out, cm)
	}
	return out
}

func convPart(raw json.RawMessage, turn int, byRef map[string]*templates.InterruptView) templates.ConvPart {
	var p struct {
		Text        *string                            `json:"text"`
		Reasoning   *string                            `json:"reasoning"`
		Media       *struct{ URL, ContentType string } `json:"media"`
		ToolRequest *struct {
			Name  string          `json:"name"`
			Ref   string          `json:"ref"`
			Input json.RawMessage `json:"input"`
		} `json:"toolRequest"`
		ToolResponse *struct {
			Name    string          `json:"name"`
			Ref     string          `json:"ref"`
			Output  json.RawMessage `json:"output"`
			Content json.RawMessage `json:"content"`
		} `json:"toolResponse"`
		Data     json.RawMessage `json:"data"`
		Custom   json.RawMessage `json:"custom"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return templates.ConvPart{Kind: "data", JSON: prettyJSON(raw)}
	}
	out := templates.ConvPart{Metadata: nonEmptyJSON(p.Metadata)}
	switch {
	case p.Text != nil:
		out.Kind, out.Text = "text", *p.Text
	case p.Reasoning != nil:
		out.Kind, out.Text = "reasoning", *p.Reasoning
	case p.Media != nil:
		out.Kind, out.Text, out.MediaType = "media", p.Media.URL, p.Media.ContentType
		if u, err := url.Parse(p.Media.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			out.MediaURL = p.Media.URL
		}
	case p.ToolRequest != nil:
		out.Kind, out.Name, out.Ref, out.JSON = "toolRequest", p.ToolRequest.Name, p.ToolRequest.Ref, prettyJSON(p.ToolRequest.Input)
		var md map[string]json.RawMessage
		if json.Unmarshal(p.Metadata, &md) == nil {
			if v, ok := md["interrupt"]; ok && string(v) != "false" && string(v) != "null" {
				out.Interrupted = true
			}
		}
		if it := byRef[strconv.Itoa(turn)+"/"+out.Name+"/"+out.Ref]; it != nil {
			out.Interrupt, out.Interrupted = it, true
		} else if it := byRef[out.Name+"/"+out.Ref]; it != nil && out.Interrupted {
			out.Interrupt = it
		}
	case p.ToolResponse != nil:
		out.Kind, out.Name, out.Ref = "toolResponse", p.ToolResponse.Name, p.ToolResponse.Ref
		out.JSON = prettyJSON(p.ToolResponse.Output)
		if out.JSON == "" {
			out.JSON = nonEmptyJSON(p.ToolResponse.Content)
		}
	case p.Data != nil:
		out.Kind, out.JSON = "data", prettyJSON(p.Data)
	case p.Custom != nil:
		out.Kind, out.JSON = "custom", prettyJSON(p.Custom)
	default:
		out.Kind, out.JSON = "data", prettyJSON(raw)
	}
	return out
}

// runErrorMessage is a run's error as a line: "STATUS: message" (the status once), or "" when
// the run has no error.
func runErrorMessage(raw json.RawMessage) string {
	var e struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &e) != nil || e.Message == "" {
		return ""
	}
	if e.Status == "" || strings.HasPrefix(e.Message, e.Status) {
		return store.Shorten(e.Message, 400)
	}
	return store.Shorten(e.Status+": "+e.Message, 400)
}

// runTickFrom is where a running run's "ran for" counts from, for the page to tick it: its start
// plus the time it waited for people; nil unless it runs.
func runTickFrom(r *store.Run) *time.Time {
	if r.Status != store.RunRunning || r.StartedAt == nil {
		return nil
	}
	t := r.StartedAt.Add(time.Duration(r.WaitedMs) * time.Millisecond)
	return &t
}
