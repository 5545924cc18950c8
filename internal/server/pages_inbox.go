package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
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

// inboxPage is GET /inbox?tool=&action=.
func (s *Server) inboxPage(c echo.Context) error {
	p, err := s.inboxData(c, c.QueryParam("tool"), c.QueryParam("action"))
	if err != nil {
		return err
	}
	switch c.QueryParam("done") {
	case "":
	default:
		p.Flash = "Resolved: " + c.QueryParam("done") + "."
	}
	return s.render(c, http.StatusOK, templates.InboxView(p))
}

// inboxItem is GET /inbox/items/{id}?tool=&action=: one pending interrupt as a fragment, for the
// live inbox; 204 when it is no longer pending or does not match the filters.
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
	run, err := s.store.RunGet(ctx, it.RunID)
	if err != nil {
		return err
	}
	tool, action := c.QueryParam("tool"), c.QueryParam("action")
	if it.Status != store.InterruptPending || (tool != "" && tool != it.Tool) || (action != "" && action != run.Action) {
		return c.NoContent(http.StatusNoContent)
	}
	msgs, err := s.store.MessageList(ctx, it.RunID)
	if err != nil {
		return err
	}
	v := s.inboxItemView(it, run.Action, msgs)
	pr := principal(c)
	return s.render(c, http.StatusOK, templates.InboxItem(v, csrfToken(c), pr != nil && auth.Allows(pr.Role, store.RoleReviewer)))
}

// inboxResolve is POST /inbox/{id}/resolve from the inbox form: approve, edit, respond or deny,
// with an optional comment. The payload is validated against the tool's schema on the server
// whatever the browser checked. A stale form gets the inbox back with who resolved it and when.
func (s *Server) inboxResolve(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	action := c.FormValue("action")
	params := runs.ResolveParams{InterruptID: id, Action: action, Comment: strings.TrimSpace(c.FormValue("comment")), Actor: principal(c).Username}
	if v := c.FormValue("version"); v != "" {
		if _, err := fmt.Sscan(v, &params.Version); err != nil {
			return Errorf(http.StatusBadRequest, "bad_request", "version %q is not a number", v)
		}
	}
	flashErr := func(status int, msg string) error {
		p, err := s.inboxData(c, "", "")
		if err != nil {
			return err
		}
		p.Flash, p.FlashError = msg, true
		return s.render(c, status, templates.InboxView(p))
	}
	switch action {
	case runs.ActionEdit:
		in := strings.TrimSpace(c.FormValue("input"))
		if !json.Valid([]byte(in)) {
			return flashErr(http.StatusUnprocessableEntity, "The edited arguments are not valid JSON.")
		}
		params.Input = json.RawMessage(in)
	case runs.ActionRespond:
		out := strings.TrimSpace(c.FormValue("output"))
		if !json.Valid([]byte(out)) {
			return flashErr(http.StatusUnprocessableEntity, "The response is not valid JSON.")
		}
		params.Output = json.RawMessage(out)
	}
	it, err := s.deps.Runs.Resolve(c.Request().Context(), params)
	var ce *runs.ConflictError
	var ve *runs.ValidationError
	switch {
	case errors.As(err, &ce):
		return flashErr(http.StatusConflict, staleMessage(ce.Interrupt))
	case errors.As(err, &ve):
		return flashErr(http.StatusUnprocessableEntity, "Not resolved: "+ve.Error())
	case err != nil:
		return runsError(err)
	}
	return c.Redirect(http.StatusSeeOther, "/inbox?done="+url.QueryEscape(it.Tool+" "+it.Status))
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
