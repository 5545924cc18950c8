package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// inboxPageSize is how many rows the compact list shows at once; the oldest come first, and a
// link pages on. It keeps the page fast with ten thousand items waiting.
const inboxPageSize = 200

// inboxResolveRedirect is GET /inbox/{id}/resolve, the address a refused form leaves behind
// without JS: reloading it shows the item.
func (s *Server) inboxResolveRedirect(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/inbox?sel="+id.String())
}

// inboxQuery is what the inbox page was asked for.
type inboxQuery struct {
	tool, action string
	sel          string
	after        *store.InterruptCursor
	// forMe keeps the items the reviewer may decide now (?for=me).
	forMe bool
}

func inboxQueryOf(c echo.Context) (inboxQuery, error) {
	q := inboxQuery{tool: c.QueryParam("tool"), action: c.QueryParam("action"), sel: c.QueryParam("sel"), forMe: c.QueryParam("for") == "me"}
	if v := c.QueryParam("after"); v != "" {
		at, id, err := decodeTimeCursor(v)
		if err != nil {
			return q, Errorf(http.StatusBadRequest, "bad_request", "after %q is not a position this server issued", v)
		}
		q.after = &store.InterruptCursor{CreatedAt: at, ID: id}
	}
	return q, nil
}

// decidingUser is the principal as the "for me" filter sees them.
func decidingUser(c echo.Context) *store.Decider {
	pr := principal(c)
	if pr == nil {
		return &store.Decider{}
	}
	return &store.Decider{Username: pr.Username, Role: pr.Role, Groups: pr.Groups}
}

// me is the reviewer's name as claims and decisions record it.
func me(c echo.Context) string {
	if pr := principal(c); pr != nil {
		return pr.Username
	}
	return ""
}

// inboxData gathers one page of pending interrupts, oldest first, and the selected one in full.
// It takes three queries whatever the number waiting: the counts by tool and action, the page of
// rows, and the selected item's history.
func (s *Server) inboxData(c echo.Context, q inboxQuery) (templates.InboxPage, error) {
	ctx := c.Request().Context()
	pr := principal(c)
	p := templates.InboxPage{Page: s.page(c, "Inbox", "inbox"), Tool: q.tool, Action: q.action,
		CanResolve: pr != nil && auth.Allows(pr.Role, store.RoleReviewer), Me: me(c)}
	facets, err := s.store.InterruptPendingFacets(ctx)
	if err != nil {
		return p, err
	}
	for _, f := range facets {
		p.Total += f.Count
		if (q.tool == "" || f.Tool == q.tool) && (q.action == "" || f.Action == q.action) {
			p.Matching += f.Count
		}
		if !slices.Contains(p.Tools, f.Tool) {
			p.Tools = append(p.Tools, f.Tool)
		}
		if !slices.Contains(p.Actions, f.Action) {
			p.Actions = append(p.Actions, f.Action)
		}
	}
	// The filters in force stay on offer, selected, even when nothing pending matches them.
	if q.tool != "" && !slices.Contains(p.Tools, q.tool) {
		p.Tools = append(p.Tools, q.tool)
	}
	if q.action != "" && !slices.Contains(p.Actions, q.action) {
		p.Actions = append(p.Actions, q.action)
	}
	slices.Sort(p.Tools)
	slices.Sort(p.Actions)
	lp := store.InterruptListParams{Status: store.InterruptPending, Tool: q.tool, Action: q.action, Limit: inboxPageSize + 1, After: q.after}
	if q.forMe {
		lp.For, p.ForMe = decidingUser(c), true
	}
	list, err := s.store.InterruptList(ctx, lp)
	if err != nil {
		return p, err
	}
	if len(list) > inboxPageSize {
		list = list[:inboxPageSize]
		last := list[len(list)-1]
		v := url.Values{}
		if q.tool != "" {
			v.Set("tool", q.tool)
		}
		if q.action != "" {
			v.Set("action", q.action)
		}
		if q.forMe {
			v.Set("for", "me")
		}
		v.Set("after", encodeTimeCursor(last.CreatedAt, last.ID))
		p.NextURL = "/inbox?" + v.Encode()
	}
	var selected *store.InterruptWithAction
	for _, it := range list {
		if q.sel == it.ID.String() || (q.sel == "" && selected == nil) {
			selected = it
		}
	}
	if selected == nil && q.sel != "" {
		// A deep link to an item outside this page (or no longer pending): shown if it waits.
		if id, err := uuid.Parse(q.sel); err == nil {
			if it, err := s.store.InterruptGet(ctx, id, false); err == nil && it.Status == store.InterruptPending {
				if run, err := s.store.RunGet(ctx, it.RunID); err == nil {
					selected = &store.InterruptWithAction{Interrupt: *it, Action: run.Action}
				}
			}
		}
		if selected == nil && len(list) > 0 {
			selected = list[0]
		}
	}
	now := time.Now()
	filter := templates.InboxFilterQuery(q.tool, q.action)
	for _, it := range list {
		r := s.inboxRow(it, me(c), now, filter)
		r.Selected = selected != nil && selected.ID == it.ID
		p.Rows = append(p.Rows, r)
	}
	if selected != nil {
		d, err := s.inboxDetail(ctx, &selected.Interrupt, selected.Action, me(c))
		if err != nil {
			return p, err
		}
		p.Detail = d
	}
	return p, nil
}

// inboxRow is one pending interrupt as a line of the compact list.
func (s *Server) inboxRow(it *store.InterruptWithAction, me string, now time.Time, filter string) templates.InboxRow {
	href := "/inbox?sel=" + it.ID.String()
	if filter != "" {
		href += "&" + strings.TrimPrefix(filter, "?")
	}
	return templates.InboxRow{ID: it.ID.String(), RunID: it.RunID.String(), Tool: it.Tool, Action: it.Action,
		Prompt: interruptMessage(it.Metadata), Age: humanAge(now.Sub(it.CreatedAt)), CreatedAt: it.CreatedAt,
		ClaimedBy: deref(it.ClaimedBy), Viewers: s.presence.viewers(it.ID.String(), me, now), Risk: interruptRisk(&it.Interrupt), Href: href,
		Routing: inboxRouting(&it.Interrupt, now)}
}

// inboxDetail is one interrupt in full: the history of its run up to it, its claim, why it needs
// confirmation, the arguments editor built from its schema, and a replay's suggestion.
func (s *Server) inboxDetail(ctx context.Context, it *store.Interrupt, action, me string) (*templates.InboxDetail, error) {
	msgs, err := s.store.MessageList(ctx, it.RunID)
	if err != nil {
		return nil, err
	}
	v := s.interruptView(it, action, nil)
	v.Conversation = conversation(msgs, nil, -1)
	d := &templates.InboxDetail{InterruptView: v, ClaimedBy: deref(it.ClaimedBy), ClaimedAt: it.ClaimedAt, Me: me,
		Risk: interruptRisk(it), Viewers: s.presence.viewers(it.ID.String(), me, time.Now())}
	d.Suggestion = inboxSuggestion(it.SuggestedResolution)
	input := v.InputJSON
	if d.Suggestion != nil && d.Suggestion.Input != "" {
		input = d.Suggestion.Input
	}
	d.Fields = schemaFields(it.InputSchema, input)
	d.Metadata = metadataRows(it.Metadata, v.Prompt)
	d.Routing = inboxRouting(it, time.Now())
	if err := s.withApprovers(ctx, it, d.Routing); err != nil {
		return nil, err
	}
	log, err := s.store.WebhookDeliveryList(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	d.Deliveries = webhookRows(log)
	return d, nil
}

// webhookRows is an interrupt's delivery log as the inbox shows it.
func webhookRows(log []*store.WebhookDelivery) []templates.WebhookDeliveryRow {
	rows := make([]templates.WebhookDeliveryRow, len(log))
	for i, d := range log {
		r := templates.WebhookDeliveryRow{Event: d.Event, Target: d.Target, Attempt: d.Attempt, At: d.AttemptedAt,
			Took: (time.Duration(d.DurationMS) * time.Millisecond).String(), Error: deref(d.Error), NextRetry: d.NextRetryAt}
		if d.StatusCode != nil {
			r.Status = strconv.Itoa(*d.StatusCode)
		}
		rows[i] = r
	}
	return rows
}

// metadataRows is an interrupt's metadata as table rows, keys in order, without the string that
// is already shown as its question.
func metadataRows(raw json.RawMessage, question string) []templates.MetaRow {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	keys := slices.Sorted(maps.Keys(m))
	rows := make([]templates.MetaRow, 0, len(keys))
	for _, k := range keys {
		var str string
		if json.Unmarshal(m[k], &str) == nil {
			if str == question && question != "" {
				continue
			}
			rows = append(rows, templates.MetaRow{Key: k, Value: str})
			continue
		}
		var buf bytes.Buffer
		if json.Compact(&buf, m[k]) != nil {
			buf.Reset()
			buf.Write(m[k])
		}
		rows = append(rows, templates.MetaRow{Key: k, Value: buf.String(), JSON: true})
	}
	return rows
}

// inboxPage is GET /inbox?tool=&action=&sel=&after=&done=. done names the interrupt just
// resolved: the page says what became of it, and says nothing for anything that is not a resolved
// interrupt.
func (s *Server) inboxPage(c echo.Context) error {
	q, err := inboxQueryOf(c)
	if err != nil {
		return err
	}
	p, err := s.inboxData(c, q)
	if err != nil {
		return err
	}
	if done := c.QueryParam("done"); done != "" {
		msg, err := s.doneMessage(c.Request().Context(), done)
		if err != nil {
			return err
		}
		p.Flash = msg
	}
	return s.render(c, http.StatusOK, templates.InboxView(p))
}

// inboxCount is GET /inbox/count?tool=&action=: how many items wait, in all and under the
// filters. The inbox script asks after live events, so that its count stays true even for a page
// that shows only some of the items.
func (s *Server) inboxCount(c echo.Context) error {
	facets, err := s.store.InterruptPendingFacets(c.Request().Context())
	if err != nil {
		return err
	}
	tool, action := c.QueryParam("tool"), c.QueryParam("action")
	var out struct {
		Pending int `json:"pending"`
		Total   int `json:"total"`
	}
	for _, f := range facets {
		out.Total += f.Count
		if (tool == "" || f.Tool == tool) && (action == "" || f.Action == action) {
			out.Pending += f.Count
		}
	}
	return c.JSON(http.StatusOK, out)
}

// doneMessage says what became of the interrupt a reviewer just resolved: "" unless id names an
// interrupt that is no longer pending.
func (s *Server) doneMessage(ctx context.Context, id string) (string, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return "", nil
	}
	it, err := s.store.InterruptGet(ctx, uid, false)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if it.Status == store.InterruptPending {
		return "", nil
	}
	run, err := s.store.RunGet(ctx, it.RunID)
	if err != nil {
		return "", err
	}
	return doneText(it, run.Action), nil
}

// doneText is doneMessage's sentence for a resolved interrupt of a run of action.
func doneText(it *store.Interrupt, action string) string {
	who := "someone"
	if it.ResolvedBy != nil && *it.ResolvedBy != "" {
		who = *it.ResolvedBy
	}
	msg := fmt.Sprintf("Resolved %s in %s (run %s): %s by %s.", it.Tool, action, shortRunID(it.RunID), it.Status, who)
	if it.Comment != nil && *it.Comment != "" {
		msg += " Reason: " + *it.Comment
	}
	return msg
}

// shortRunID is the end of a run's id, as the pages show it.
func shortRunID(id uuid.UUID) string {
	s := id.String()
	return s[len(s)-8:]
}

// fragmentHeader marks a script's request for a page's fragment (ui.js fetchHTML sends it): the
// same address opened in a tab gets the whole page.
const fragmentHeader = "X-Loupe-Fragment"

// inboxItem is GET /inbox/items/{id}?tool=&action=: one pending interrupt's detail as a fragment,
// for the live inbox's selection (the whole styled page when opened on its own, fragmentHeader
// absent); with row=1 its line of the list. The fragment is 204 when it is no longer pending or
// does not match the filters. With notice=1 it is the note for an interrupt resolved
// while the reviewer worked on it (who, when, how), and 204 while it is pending.
func (s *Server) inboxItem(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	it, err := s.store.InterruptGet(ctx, id, false)
	if err != nil {
		return err
	}
	tool, action := c.QueryParam("tool"), c.QueryParam("action")
	if c.QueryParam("notice") != "" {
		if it.Status == store.InterruptPending {
			return c.NoContent(http.StatusNoContent)
		}
		return s.render(c, http.StatusOK, templates.InboxResolvedNote(resolvedNote(it), "/inbox"+templates.InboxFilterQuery(tool, action)))
	}
	run, err := s.store.RunGet(ctx, it.RunID)
	if err != nil {
		return err
	}
	pr := principal(c)
	canResolve := pr != nil && auth.Allows(pr.Role, store.RoleReviewer)
	filter := templates.InboxFilterQuery(tool, action)
	c.Response().Header().Add("Vary", fragmentHeader)
	if c.Request().Header.Get(fragmentHeader) == "" && c.QueryParam("row") == "" {
		// Opened on its own (a link, a new tab): the whole page, styled, whatever its status.
		d, err := s.inboxDetail(ctx, it, run.Action, me(c))
		if err != nil {
			return err
		}
		o := templates.InboxItemOpts{CSRF: csrfToken(c), CanResolve: canResolve, Filter: filter}
		if it.Status != store.InterruptPending {
			o.Form = &templates.InboxForm{ID: it.ID.String(), Resolved: resolvedNote(it)}
		}
		return s.render(c, http.StatusOK, templates.InboxItemView(templates.InboxItemPage{
			Page: s.page(c, it.Tool+" · Inbox", "inbox"), Detail: d, Opts: o}))
	}
	if it.Status != store.InterruptPending || (tool != "" && tool != it.Tool) || (action != "" && action != run.Action) {
		return c.NoContent(http.StatusNoContent)
	}
	if c.QueryParam("row") != "" {
		return s.render(c, http.StatusOK, templates.InboxRowItem(s.inboxRow(&store.InterruptWithAction{Interrupt: *it, Action: run.Action}, me(c), time.Now(), filter), canResolve))
	}
	d, err := s.inboxDetail(ctx, it, run.Action, me(c))
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.InboxDetailView(d, templates.InboxItemOpts{CSRF: csrfToken(c), CanResolve: canResolve, Filter: filter}))
}

// inboxResolve is POST /inbox/{id}/resolve?tool=&action= from the inbox form: approve, edit,
// respond or deny, with a comment, or apply=suggestion for a replay's suggested decision. The
// query is the page's filters, kept by the redirect and by a refusal. A denial, and any decision
// on an item that moves an amount or whose tool is irreversible, is first shown back as a
// confirmation step (confirm=1 commits it), and a denial needs a reason, which the model receives.
// The payload is validated against the tool's schema on the server whatever the browser checked.
// "Approve" with arguments that differ from the interrupt's (as JSON) is an edit: a change is
// never dropped. A refused form comes back with what the reviewer sent and why, at the field it
// names; a stale one says who resolved it and when.
func (s *Server) inboxResolve(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	req := c.Request()
	if err := req.ParseForm(); err != nil {
		return Errorf(http.StatusBadRequest, "bad_request", "cannot read the form: %v", err)
	}
	q := inboxQuery{tool: c.QueryParam("tool"), action: c.QueryParam("action"), sel: id.String()}
	// The decision comes from the body only: the query's action is the page's filter.
	action := req.PostFormValue("action")
	_, hasInput := req.PostForm["input"]
	form := &templates.InboxForm{ID: id.String(), Input: req.PostFormValue("input"), HasInput: hasInput,
		Output: req.PostFormValue("output"), Comment: req.PostFormValue("comment")}
	if r := strings.TrimSpace(req.PostFormValue("reason")); r != "" {
		form.Comment = r
	}
	params := runs.ResolveParams{InterruptID: id, Action: action, Actor: me(c), Decider: decider(c)}

	// inPlace: the inbox script sent the form (fetch, Accept: application/json) and applies the
	// answer where the reviewer is, without a page load.
	inPlace := wantsJSON(c)
	// refuse shows the inbox again with the reviewer's values in the item, and why next to it; in
	// place, the item alone, as JSON with the flash.
	refuse := func(status int, flash string) error {
		if inPlace {
			return s.inboxRefuseInPlace(c, status, id, q, form, flash)
		}
		p, err := s.inboxData(c, q)
		if err != nil {
			return err
		}
		if p.Detail == nil || p.Detail.ID != form.ID {
			// Resolved meanwhile, or outside the filters: shown anyway, so that nothing typed is lost.
			it, err := s.store.InterruptGet(ctx, id, false)
			if err != nil {
				return err
			}
			run, err := s.store.RunGet(ctx, it.RunID)
			if err != nil {
				return err
			}
			if p.Detail, err = s.inboxDetail(ctx, it, run.Action, me(c)); err != nil {
				return err
			}
		}
		p.Form = form
		p.Flash, p.FlashError = flash, true // not applied, whether refused or waiting for confirmation
		return s.render(c, status, templates.InboxView(p))
	}
	const kept = "Not resolved: your arguments and comment are kept below, with the reason."
	invalid := func(msg string) error {
		form.Error = msg
		return refuse(http.StatusUnprocessableEntity, kept)
	}

	if v := req.PostFormValue("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return invalid(fmt.Sprintf("The form's version %q is not a whole number, so the decision was not applied: reload the inbox and decide again.", v))
		}
		params.Version = n
	}
	orig, err := s.store.InterruptGet(ctx, id, false)
	if err != nil {
		return runsError(err)
	}
	if req.PostFormValue("apply") == "suggestion" {
		sg := inboxSuggestion(orig.SuggestedResolution)
		if sg == nil {
			return invalid("This item has no suggested decision to apply.")
		}
		action = sg.Action
		form.Input, form.HasInput, hasInput = sg.Input, sg.Input != "", sg.Input != ""
		if !hasInput {
			form.Input = prettyJSON(orig.Input)
		}
		form.Output = sg.Output
		if strings.TrimSpace(form.Comment) == "" {
			form.Comment = sg.Comment
		}
	}
	in := strings.TrimSpace(form.Input)
	if action == runs.ActionApprove && hasInput && !sameJSON(in, string(orig.Input)) {
		action = runs.ActionEdit
	}
	params.Action = action
	params.Comment = strings.TrimSpace(form.Comment)
	switch action {
	case runs.ActionEdit:
		if !json.Valid([]byte(in)) {
			return invalid("The edited arguments are not valid JSON.")
		}
		if err := store.CheckJSON("input", json.RawMessage(in)); err != nil {
			return invalid("The edited arguments cannot be stored: " + err.Error() + ".")
		}
		params.Input = json.RawMessage(in)
	case runs.ActionRespond:
		out := strings.TrimSpace(form.Output)
		if !json.Valid([]byte(out)) {
			return invalid("The response is not valid JSON.")
		}
		if err := store.CheckJSON("output", json.RawMessage(out)); err != nil {
			return invalid("The response cannot be stored: " + err.Error() + ".")
		}
		params.Output = json.RawMessage(out)
	}
	var ce *runs.ConflictError
	var ve *runs.ValidationError
	// refused says why the service refused the payload, at the field it names.
	refused := func() error {
		if ptr, ok := strings.CutPrefix(ve.Field, "input/"); ok {
			form.FieldErrors = map[string]string{"/" + strings.SplitN(ptr, "/", 2)[0]: ve.Message}
		}
		if ve.Field == "comment" {
			form.ConfirmAction, form.ReasonError = action, ve.Message
		}
		return invalid("Not resolved: " + ve.Error())
	}
	// The confirmation step: a denial, and anything on an amount or an irreversible tool. The
	// payload is checked first, so that a refusal comes before the question.
	if orig.Status == store.InterruptPending && (action == runs.ActionDeny || interruptRisk(orig) != "") {
		if err := s.deps.Runs.CheckResolve(ctx, params); errors.As(err, &ve) {
			return refused()
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return runsError(err)
		}
		if req.PostFormValue("confirm") != "1" {
			form.Confirm, form.ConfirmAction = true, action
			return refuse(http.StatusOK, "Confirm the decision below: it is not applied yet.")
		}
		if action == runs.ActionDeny && params.Comment == "" {
			form.Confirm, form.ConfirmAction = true, action
			form.ReasonError = "Say why you deny it: the model receives the reason."
			return refuse(http.StatusUnprocessableEntity, "Not denied: a denial needs a reason.")
		}
	}
	it, err := s.deps.Runs.Resolve(ctx, params)
	switch {
	case errors.As(err, &ce) && ce.ClaimedBy != "":
		form.Error = fmt.Sprintf("%s has claimed this item, so your decision was not applied: ask them, or take it over.", ce.ClaimedBy)
		return refuse(http.StatusConflict, form.Error)
	case errors.As(err, &ce):
		if ce.Interrupt.Status == store.InterruptPending {
			form.Error = staleMessage(ce.Interrupt)
		} else {
			form.Resolved = resolvedNote(ce.Interrupt)
		}
		return refuse(http.StatusConflict, staleMessage(ce.Interrupt))
	case errors.As(err, &ve):
		return refused()
	case errors.Is(err, runs.ErrForbidden):
		form.Error = "Not applied: " + err.Error()
		return refuse(http.StatusForbidden, form.Error)
	case err != nil:
		return runsError(err)
	}
	if inPlace {
		run, err := s.store.RunGet(ctx, it.RunID)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, inboxDecision{ID: it.ID.String(), Status: it.Status, Flash: doneText(it, run.Action)})
	}
	fq := templates.InboxFilterQuery(q.tool, q.action)
	if fq == "" {
		fq = "?"
	} else {
		fq += "&"
	}
	return c.Redirect(http.StatusSeeOther, "/inbox"+fq+"done="+url.QueryEscape(it.ID.String()))
}

// inboxDecision is the answer to a decision sent in place: what became of the interrupt (Status,
// "" when it was not applied), the flash to show, and, when the item must be shown again (refused,
// or waiting for confirmation), its detail as HTML.
type inboxDecision struct {
	ID         string `json:"id"`
	Status     string `json:"status,omitempty"`
	Flash      string `json:"flash"`
	FlashError bool   `json:"flash_error,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// inboxRefuseInPlace answers a refused or confirming in-place decision: the item's detail with the
// reviewer's values kept and why, as inboxResolve's page would show it, without the list.
func (s *Server) inboxRefuseInPlace(c echo.Context, status int, id uuid.UUID, q inboxQuery, form *templates.InboxForm, flash string) error {
	ctx := c.Request().Context()
	it, err := s.store.InterruptGet(ctx, id, false)
	if err != nil {
		return err
	}
	run, err := s.store.RunGet(ctx, it.RunID)
	if err != nil {
		return err
	}
	d, err := s.inboxDetail(ctx, it, run.Action, me(c))
	if err != nil {
		return err
	}
	pr := principal(c)
	var buf bytes.Buffer
	opts := templates.InboxItemOpts{CSRF: csrfToken(c), CanResolve: pr != nil && auth.Allows(pr.Role, store.RoleReviewer),
		Filter: templates.InboxFilterQuery(q.tool, q.action), Form: form}
	if err := templates.InboxDetailView(d, opts).Render(ctx, &buf); err != nil {
		return fmt.Errorf("render inbox item %s: %w", id, err)
	}
	return c.JSON(status, inboxDecision{ID: id.String(), Flash: flash, FlashError: true, Detail: buf.String()})
}

// inboxClaim is POST /inbox/{id}/claim: op=claim takes a pending item, release gives it back,
// take takes it over from whoever has it, and assign (with to=) gives it to another reviewer.
// Every change is audited and announced to the other inboxes.
func (s *Server) inboxClaim(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	who := me(c)
	op := c.FormValue("op")
	to := strings.TrimSpace(c.FormValue("to"))
	q := inboxQuery{tool: c.QueryParam("tool"), action: c.QueryParam("action"), sel: id.String()}
	var it *store.Interrupt
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		var err error
		switch op {
		case "claim":
			it, err = tx.InterruptClaim(ctx, store.InterruptClaimParams{ID: id, To: who})
		case "take":
			it, err = tx.InterruptClaim(ctx, store.InterruptClaimParams{ID: id, To: who, Force: true})
		case "assign":
			if to == "" || len(to) > 200 {
				return Errorf(http.StatusUnprocessableEntity, "invalid", "assign needs the reviewer's name (at most 200 bytes)")
			}
			it, err = tx.InterruptClaim(ctx, store.InterruptClaimParams{ID: id, To: to, Force: true})
		case "release":
			it, err = tx.InterruptRelease(ctx, id, who, false)
		default:
			return Errorf(http.StatusBadRequest, "bad_request", "op %q: want claim, release, take or assign", op)
		}
		if err != nil {
			return err
		}
		return tx.AuditInsert(ctx, who, "interrupt."+op, "interrupt", id.String(),
			map[string]any{"run_id": it.RunID, "tool": it.Tool, "claimed_by": deref(it.ClaimedBy)})
	})
	var flash string
	switch {
	case errors.Is(err, store.ErrClaimed):
		cur, gerr := s.store.InterruptGet(ctx, id, false)
		if gerr != nil {
			return gerr
		}
		flash = fmt.Sprintf("%s has claimed this item already: take it over if you must.", deref(cur.ClaimedBy))
	case errors.Is(err, store.ErrNotFound):
		flash = "This item is no longer pending."
	case err != nil:
		return err
	}
	if flash != "" {
		p, err := s.inboxData(c, q)
		if err != nil {
			return err
		}
		p.Flash, p.FlashError = flash, true
		return s.render(c, http.StatusConflict, templates.InboxView(p))
	}
	if s.deps.Live != nil {
		s.deps.Live.Publish(uuid.Nil, event.InterruptClaimedData{InterruptID: id.String(), ClaimedBy: deref(it.ClaimedBy)})
	}
	v := url.Values{"sel": {id.String()}}
	if q.tool != "" {
		v.Set("tool", q.tool)
	}
	if q.action != "" {
		v.Set("action", q.action)
	}
	return c.Redirect(http.StatusSeeOther, "/inbox?"+v.Encode())
}

// inboxBulkMax is the most items one bulk decision takes.
const inboxBulkMax = store.InterruptListMax

// inboxBulk is POST /inbox/bulk: approve or deny the selected items (id=…, repeated). Each one
// goes through the same path as a single decision, so each is locked, checked (still pending,
// not claimed by another) and audited on its own. The decision is recorded first; without JS it
// is applied whole and the answer redirects to its result page (inboxBulkPage); the script
// (Accept: application/json) gets its id and applies it a step at a time, showing progress. A
// denial needs a reason, which the model receives; a denial, and an approval that includes an
// item on an amount or an irreversible tool, needs confirm=1.
func (s *Server) inboxBulk(c echo.Context) error {
	ctx := c.Request().Context()
	req := c.Request()
	if err := req.ParseForm(); err != nil {
		return Errorf(http.StatusBadRequest, "bad_request", "cannot read the form: %v", err)
	}
	q := inboxQuery{tool: c.QueryParam("tool"), action: c.QueryParam("action")}
	action := req.PostFormValue("action")
	reason := strings.TrimSpace(req.PostFormValue("reason"))
	confirmed := req.PostFormValue("confirm") == "1"
	var ids []uuid.UUID
	for _, v := range req.PostForm["id"] {
		id, err := uuid.Parse(v)
		if err != nil {
			return Errorf(http.StatusBadRequest, "bad_request", "id %q is not an interrupt id", v)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	refuse := func(msg string) error {
		if wantsJSON(c) {
			return Errorf(http.StatusUnprocessableEntity, "invalid", "Nothing was resolved: %s", msg)
		}
		p, err := s.inboxData(c, q)
		if err != nil {
			return err
		}
		p.BulkError = msg
		p.Flash, p.FlashError = "Nothing was resolved: "+msg, true
		return s.render(c, http.StatusUnprocessableEntity, templates.InboxView(p))
	}
	switch {
	case action != runs.ActionApprove && action != runs.ActionDeny:
		return refuse(fmt.Sprintf("bulk decisions approve or deny, not %q.", action))
	case len(ids) == 0:
		return refuse("select the items first.")
	case len(ids) > inboxBulkMax:
		return refuse(fmt.Sprintf("%d items are selected; one bulk decision takes at most %d.", len(ids), inboxBulkMax))
	case action == runs.ActionDeny && reason == "":
		return refuse("a denial needs a reason: the model receives it.")
	case action == runs.ActionDeny && !confirmed:
		return refuse(fmt.Sprintf("confirm that you have checked the %d selected items before denying them.", len(ids)))
	}
	if action == runs.ActionApprove && !confirmed {
		risky := 0
		for _, id := range ids {
			it, err := s.store.InterruptGet(ctx, id, false)
			if err == nil && it.Status == store.InterruptPending && interruptRisk(it) != "" {
				risky++
			}
		}
		if risky > 0 {
			return refuse(fmt.Sprintf("%d of the selected items move an amount or are irreversible: confirm that you have checked them.", risky))
		}
	}
	bulk, err := s.store.InboxBulkCreate(ctx, store.InboxBulkCreateParams{Actor: me(c), Action: action, Reason: reason, InterruptIDs: ids})
	if err != nil {
		return err
	}
	page := "/inbox/bulk/" + bulk.ID.String() + templates.InboxFilterQuery(q.tool, q.action)
	if wantsJSON(c) {
		// The script applies it a slice at a time (inboxBulkStep), showing progress, then opens page.
		return c.JSON(http.StatusCreated, inboxBulkProgress{ID: bulk.ID.String(), Total: len(ids), URL: page})
	}
	if _, err := s.inboxBulkApply(c, bulk, len(ids)); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, page)
}

// inboxBulkStepSize is how many items one step of a bulk decision applies: small enough that the
// progress moves every fraction of a second.
const inboxBulkStepSize = 10

// inboxBulkProgress is a bulk decision's progress as the inbox script shows it.
type inboxBulkProgress struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
	Done  int    `json:"done"`
	OK    int    `json:"ok"`
	// Finished says no item is left to apply; URL is the result page.
	Finished bool   `json:"finished"`
	URL      string `json:"url"`
}

// inboxBulkApply applies up to limit items of a bulk decision that no step has taken yet, each
// through the same path as a single decision (locked, checked, audited on its own), and records
// what became of each. It returns how many it took.
func (s *Server) inboxBulkApply(c echo.Context, bulk *store.InboxBulk, limit int) (int, error) {
	ctx := c.Request().Context()
	items, err := s.store.InboxBulkTake(ctx, bulk.ID, limit)
	if err != nil {
		return 0, err
	}
	for _, r := range items {
		it, err := s.deps.Runs.Resolve(ctx, runs.ResolveParams{InterruptID: r.InterruptID, Action: bulk.Action, Comment: bulk.Reason, Actor: bulk.Actor,
			Decider: decider(c)})
		var ce *runs.ConflictError
		var ve *runs.ValidationError
		switch {
		case err == nil:
			r.OK, r.Status, r.Tool, r.RunID = true, it.Status, it.Tool, &it.RunID
			r.Message = "by " + deref(it.ResolvedBy)
		case errors.As(err, &ce):
			r.Tool, r.RunID, r.Status = ce.Interrupt.Tool, &ce.Interrupt.RunID, ce.Interrupt.Status
			if ce.ClaimedBy != "" {
				r.Message = "not applied: claimed by " + ce.ClaimedBy
			} else {
				r.Message = "not applied: " + staleMessage(ce.Interrupt)
			}
		case errors.As(err, &ve):
			r.Message = "not applied: " + ve.Error()
		case errors.Is(err, store.ErrNotFound):
			r.Message = "not applied: no such interrupt"
		default:
			r.Message = "not applied: " + err.Error()
		}
		if r.Tool == "" {
			if cur, err := s.store.InterruptGet(ctx, r.InterruptID, false); err == nil {
				r.Tool, r.RunID = cur.Tool, &cur.RunID
			}
		}
		if err := s.store.InboxBulkItemDone(ctx, r); err != nil {
			return 0, err
		}
	}
	return len(items), nil
}

// inboxBulkOf is the bulk decision named by the path, refused to anyone but the reviewer who
// took it.
func (s *Server) inboxBulkOf(c echo.Context) (*store.InboxBulk, []*store.InboxBulkItem, error) {
	id, err := pathID(c, "id")
	if err != nil {
		return nil, nil, err
	}
	bulk, items, err := s.store.InboxBulkGet(c.Request().Context(), id)
	if err != nil {
		return nil, nil, err
	}
	if bulk.Actor != me(c) {
		return nil, nil, Errorf(http.StatusNotFound, "not_found", "no bulk decision %s of yours", id)
	}
	return bulk, items, nil
}

// inboxBulkStep is POST /inbox/bulk/{id}/step: apply the next slice of a bulk decision. The
// script calls it until finished (JSON); the result page's "Apply the rest" posts it without JS
// and is redirected back.
func (s *Server) inboxBulkStep(c echo.Context) error {
	bulk, items, err := s.inboxBulkOf(c)
	if err != nil {
		return err
	}
	page := "/inbox/bulk/" + bulk.ID.String() + templates.InboxFilterQuery(c.QueryParam("tool"), c.QueryParam("action"))
	if !wantsJSON(c) {
		if _, err := s.inboxBulkApply(c, bulk, len(items)); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, page)
	}
	if _, err := s.inboxBulkApply(c, bulk, inboxBulkStepSize); err != nil {
		return err
	}
	if _, items, err = s.store.InboxBulkGet(c.Request().Context(), bulk.ID); err != nil {
		return err
	}
	p := inboxBulkProgress{ID: bulk.ID.String(), Total: len(items), URL: page, Finished: true}
	for _, it := range items {
		if it.DoneAt != nil {
			p.Done++
		}
		if it.OK {
			p.OK++
		}
		if it.StartedAt == nil {
			p.Finished = false
		}
	}
	return c.JSON(http.StatusOK, p)
}

// inboxBulkPage is GET /inbox/bulk/{id}: what became of each item of a bulk decision, on a page
// of its own (the POST redirects here, so a reload shows it again rather than re-posting).
func (s *Server) inboxBulkPage(c echo.Context) error {
	bulk, items, err := s.inboxBulkOf(c)
	if err != nil {
		return err
	}
	p := templates.InboxBulkPage{Page: s.page(c, "Bulk decision", "inbox"), ID: bulk.ID.String(), Action: bulk.Action,
		Reason: bulk.Reason, At: bulk.CreatedAt, Back: "/inbox" + templates.InboxFilterQuery(c.QueryParam("tool"), c.QueryParam("action"))}
	ok := 0
	for _, it := range items {
		r := templates.BulkResult{ID: it.InterruptID.String(), OK: it.OK, Status: it.Status, Tool: it.Tool, Message: it.Message}
		if it.RunID != nil {
			r.RunID = it.RunID.String()
		}
		switch {
		case it.DoneAt == nil && it.StartedAt == nil:
			r.Message = "not applied yet"
			p.Left++
		case it.DoneAt == nil:
			r.Message = "being applied, or interrupted while it was: see the item's history"
		}
		if it.OK {
			ok++
		}
		p.Results = append(p.Results, r)
	}
	verb := map[string]string{runs.ActionApprove: "Approved", runs.ActionDeny: "Denied"}[bulk.Action]
	p.Summary = fmt.Sprintf("%s %d of %d selected items; each result is below.", verb, ok, len(items))
	p.Failed = ok < len(items)
	return s.render(c, http.StatusOK, templates.InboxBulkView(p))
}

// inboxHistoryPage is GET /inbox/history?tool=&action=&status=&by=&q=&before=: resolved items,
// most recent first, with who resolved them, when, how and the comment.
func (s *Server) inboxHistoryPage(c echo.Context) error {
	p := templates.InboxHistoryPage{Page: s.page(c, "Inbox history", "inbox"), Tool: c.QueryParam("tool"), Action: c.QueryParam("action"),
		Status: c.QueryParam("status"), By: c.QueryParam("by"), Query: c.QueryParam("q")}
	for _, st := range store.InterruptStatuses {
		if st != store.InterruptPending {
			p.Statuses = append(p.Statuses, st)
		}
	}
	if p.Status != "" && !slices.Contains(p.Statuses, p.Status) {
		return Errorf(http.StatusBadRequest, "bad_request", "status %q: want one of %s", p.Status, strings.Join(p.Statuses, ", "))
	}
	params := store.InterruptHistoryParams{Tool: p.Tool, Action: p.Action, Status: p.Status, By: p.By, Query: p.Query, Limit: inboxPageSize + 1}
	if v := c.QueryParam("before"); v != "" {
		at, id, err := decodeTimeCursor(v)
		if err != nil {
			return Errorf(http.StatusBadRequest, "bad_request", "before %q is not a position this server issued", v)
		}
		params.Before = &store.InterruptHistoryCursor{ResolvedAt: at, ID: id}
	}
	list, err := s.store.InterruptHistory(c.Request().Context(), params)
	if err != nil {
		return err
	}
	if len(list) > inboxPageSize {
		list = list[:inboxPageSize]
		last := list[len(list)-1]
		v := c.QueryParams()
		v.Set("before", encodeTimeCursor(*last.ResolvedAt, last.ID))
		p.NextURL = "/inbox/history?" + v.Encode()
	}
	for _, it := range list {
		p.Rows = append(p.Rows, templates.InboxHistoryRow{ID: it.ID.String(), RunID: it.RunID.String(), Tool: it.Tool, Action: it.Action,
			Prompt: interruptMessage(it.Metadata), Status: it.Status, ResolvedBy: deref(it.ResolvedBy), ResolvedAt: it.ResolvedAt,
			Comment: deref(it.Comment), Resolution: nonEmptyJSON(it.Resolution)})
	}
	return s.render(c, http.StatusOK, templates.InboxHistoryView(p))
}

// sameJSON says whether two texts are the same JSON value: the same text, or two valid documents
// equal once whitespace and key order are set aside. Numbers compare by their text ("500" and
// "500.0" differ), so that no change is lost to rounding. inbox.js compares the same way.
func sameJSON(a, b string) bool {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if a == b {
		return true
	}
	ca, okA := canonicalJSON(a)
	cb, okB := canonicalJSON(b)
	return okA && okB && ca == cb
}

// canonicalJSON re-encodes one JSON document with sorted keys and no spaces, numbers as written.
func canonicalJSON(s string) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// resolvedNote says who resolved an interrupt, when and how, for an item resolved while open.
func resolvedNote(it *store.Interrupt) string {
	who, when := "someone", ""
	if it.ResolvedBy != nil && *it.ResolvedBy != "" {
		who = *it.ResolvedBy
	}
	if it.ResolvedAt != nil {
		when = " at " + it.ResolvedAt.UTC().Format(time.DateTime) + " UTC"
	}
	return fmt.Sprintf("Resolved by %s%s (%s).", who, when, it.Status)
}

// staleMessage says who resolved an interrupt first, and when.
func staleMessage(it *store.Interrupt) string {
	who, when := "someone", ""
	if it.ResolvedBy != nil && *it.ResolvedBy != "" {
		who = *it.ResolvedBy
	}
	if it.ResolvedAt != nil {
		when = " at " + it.ResolvedAt.UTC().Format(time.DateTime) + " UTC"
	}
	if it.Status == store.InterruptPending {
		return fmt.Sprintf("This %s interrupt changed since the page was loaded; it is shown again below as it is now.", it.Tool)
	}
	return fmt.Sprintf("Already resolved by %s%s (%s); your decision was not applied.", who, when, it.Status)
}
