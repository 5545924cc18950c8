package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// inboxData gathers the pending interrupts, oldest first, with the runs' actions and the history
// up to each interrupt. It takes two queries whatever the number of interrupts: the interrupts
// joined to their runs, then the histories of the runs shown.
func (s *Server) inboxData(c echo.Context, tool, action string) (templates.InboxPage, error) {
	ctx := c.Request().Context()
	pr := principal(c)
	p := templates.InboxPage{Page: s.page(c, "Inbox", "inbox"), Tool: tool, Action: action,
		CanResolve: pr != nil && auth.Allows(pr.Role, store.RoleReviewer)}
	all, err := s.store.InterruptList(ctx, store.InterruptListParams{Status: store.InterruptPending, Limit: 500})
	if err != nil {
		return p, err
	}
	var shown []*store.InterruptWithAction
	var runIDs []uuid.UUID
	for _, it := range all {
		if !slices.Contains(p.Tools, it.Tool) {
			p.Tools = append(p.Tools, it.Tool)
		}
		if !slices.Contains(p.Actions, it.Action) {
			p.Actions = append(p.Actions, it.Action)
		}
		if (tool != "" && it.Tool != tool) || (action != "" && it.Action != action) {
			continue
		}
		shown = append(shown, it)
		if !slices.Contains(runIDs, it.RunID) {
			runIDs = append(runIDs, it.RunID)
		}
	}
	// The filters in force stay on offer, selected, even when nothing pending matches them.
	if tool != "" && !slices.Contains(p.Tools, tool) {
		p.Tools = append(p.Tools, tool)
	}
	if action != "" && !slices.Contains(p.Actions, action) {
		p.Actions = append(p.Actions, action)
	}
	slices.Sort(p.Tools)
	slices.Sort(p.Actions)
	histories, err := s.store.MessageListByRuns(ctx, runIDs)
	if err != nil {
		return p, err
	}
	for _, it := range shown {
		p.Items = append(p.Items, s.inboxItemView(&it.Interrupt, it.Action, histories[it.RunID]))
	}
	return p, nil
}

// inboxItemView is one inbox item: the interrupt and its run's history.
func (s *Server) inboxItemView(it *store.Interrupt, action string, msgs []*store.RunMessage) templates.InterruptView {
	v := s.interruptView(it, action, nil)
	v.Conversation = conversation(msgs, nil, -1)
	return v
}

// inboxPage is GET /inbox?tool=&action=&done=. done names the interrupt just resolved: the
// page says what became of it, and says nothing for anything that is not a resolved interrupt.
func (s *Server) inboxPage(c echo.Context) error {
	p, err := s.inboxData(c, c.QueryParam("tool"), c.QueryParam("action"))
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
	who := "someone"
	if it.ResolvedBy != nil && *it.ResolvedBy != "" {
		who = *it.ResolvedBy
	}
	return fmt.Sprintf("Resolved %s in %s (run %s): %s by %s.", it.Tool, run.Action, shortRunID(it.RunID), it.Status, who), nil
}

// shortRunID is the end of a run's id, as the pages show it.
func shortRunID(id uuid.UUID) string {
	s := id.String()
	return s[len(s)-8:]
}

// inboxItem is GET /inbox/items/{id}?tool=&action=: one pending interrupt as a fragment, for the
// live inbox; 204 when it is no longer pending or does not match the filters. With notice=1 it is
// the note for an interrupt resolved while the reviewer worked on it (who, when, how), and 204
// while it is pending.
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
	if it.Status != store.InterruptPending || (tool != "" && tool != it.Tool) || (action != "" && action != run.Action) {
		return c.NoContent(http.StatusNoContent)
	}
	msgs, err := s.store.MessageList(ctx, it.RunID)
	if err != nil {
		return err
	}
	v := s.inboxItemView(it, run.Action, msgs)
	pr := principal(c)
	return s.render(c, http.StatusOK, templates.InboxItem(v, templates.InboxItemOpts{CSRF: csrfToken(c),
		CanResolve: pr != nil && auth.Allows(pr.Role, store.RoleReviewer), Filter: templates.InboxFilterQuery(tool, action)}))
}

// inboxResolve is POST /inbox/{id}/resolve?tool=&action= from the inbox form: approve, edit,
// respond or deny, with an optional comment. The query is the page's filters, kept by the redirect
// and by a refusal. The payload is validated against the tool's schema on the server whatever the
// browser checked. "Approve" with arguments that differ from the interrupt's (as JSON) is an edit:
// a change is never dropped. A refused form comes back with what the reviewer sent and why, next
// to it; a stale one says who resolved it and when.
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
	tool, filterAction := c.QueryParam("tool"), c.QueryParam("action")
	// The decision comes from the body only: the query's action is the page's filter.
	action := req.PostFormValue("action")
	_, hasInput := req.PostForm["input"]
	form := &templates.InboxForm{ID: id.String(), Input: req.PostFormValue("input"), HasInput: hasInput,
		Output: req.PostFormValue("output"), Comment: req.PostFormValue("comment")}
	params := runs.ResolveParams{InterruptID: id, Action: action, Comment: strings.TrimSpace(form.Comment), Actor: principal(c).Username}

	// refuse shows the inbox again with the reviewer's values in the item, and why next to it.
	refuse := func(status int, flash string) error {
		p, err := s.inboxData(c, tool, filterAction)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(p.Items, func(v templates.InterruptView) bool { return v.ID == form.ID }) {
			// Resolved meanwhile, or outside the filters: shown anyway, so that nothing typed is lost.
			v, err := s.inboxItemByID(ctx, id)
			if err != nil {
				return err
			}
			p.Items = append([]templates.InterruptView{v}, p.Items...)
		}
		p.Flash, p.FlashError = flash, true
		return s.render(c, status, templates.InboxViewForm(p, form))
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
	in := strings.TrimSpace(form.Input)
	if action == runs.ActionApprove && hasInput {
		orig, err := s.store.InterruptGet(ctx, id, false)
		if err != nil {
			return runsError(err)
		}
		if !sameJSON(in, string(orig.Input)) {
			action, params.Action = runs.ActionEdit, runs.ActionEdit
		}
	}
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
	it, err := s.deps.Runs.Resolve(ctx, params)
	var ce *runs.ConflictError
	var ve *runs.ValidationError
	switch {
	case errors.As(err, &ce):
		if ce.Interrupt.Status == store.InterruptPending {
			form.Error = staleMessage(ce.Interrupt)
		} else {
			form.Resolved = resolvedNote(ce.Interrupt)
		}
		return refuse(http.StatusConflict, staleMessage(ce.Interrupt))
	case errors.As(err, &ve):
		return invalid("Not resolved: " + ve.Error())
	case err != nil:
		return runsError(err)
	}
	q := templates.InboxFilterQuery(tool, filterAction)
	if q == "" {
		q = "?"
	} else {
		q += "&"
	}
	return c.Redirect(http.StatusSeeOther, "/inbox"+q+"done="+url.QueryEscape(it.ID.String()))
}

// inboxItemByID is one interrupt as an inbox item, whatever its status.
func (s *Server) inboxItemByID(ctx context.Context, id uuid.UUID) (templates.InterruptView, error) {
	it, err := s.store.InterruptGet(ctx, id, false)
	if err != nil {
		return templates.InterruptView{}, err
	}
	run, err := s.store.RunGet(ctx, it.RunID)
	if err != nil {
		return templates.InterruptView{}, err
	}
	msgs, err := s.store.MessageList(ctx, it.RunID)
	if err != nil {
		return templates.InterruptView{}, err
	}
	return s.inboxItemView(it, run.Action, msgs), nil
}

// sameJSON says whether two texts are the same JSON value: the same text, or two valid documents
// equal once whitespace and key order are set aside. Numbers compare by their text ("500" and
// "500.0" differ), so that no change is lost to rounding. ui.js compares the same way.
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
