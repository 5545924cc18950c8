package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// whatIfShown caps the disagreements the page lists.
const whatIfShown = 200

func (s *Server) policyData(c echo.Context) (templates.PolicyPage, error) {
	cur, err := s.currentPolicy(c)
	if err != nil {
		return templates.PolicyPage{}, err
	}
	p := templates.PolicyPage{Page: s.page(c, "Approval policy", "policy"), Version: cur.Version, Origin: cur.Origin,
		CreatedBy: cur.CreatedBy, Source: cur.Source, File: cur.File, Draft: cur.Source, Last: 1000}
	if p.Draft == "" {
		p.Draft = "rules:\n  - name: small-amounts\n    tool: transfer\n    when: input.amount < 100\n    decide: approve\n    reason: small amounts need no review\n"
	}
	p.CanEdit = cur.File == "" && principal(c).Role == store.RoleAdmin
	if t, ok := cur.CreatedAt.(time.Time); ok {
		p.CreatedAt = t
	}
	// ?version=N shows a stored version (a draft, or one once in force) in the editor and the
	// what-if, to try it and to put it in force.
	if v, err := strconv.ParseInt(c.QueryParam("version"), 10, 64); err == nil && v > 0 {
		sel, err := s.store.PolicyGet(c.Request().Context(), v)
		switch {
		case errors.Is(err, store.ErrNotFound):
			p.Flash, p.FlashError = "There is no version "+strconv.FormatInt(v, 10)+".", true
		case err != nil:
			return templates.PolicyPage{}, err
		default:
			p.Selected, p.Source, p.Draft = sel.Version, sel.Source, sel.Source
		}
	}
	for _, r := range cur.Rules {
		row := templates.PolicyRuleRow{Name: r.Name, Action: r.Action, Tool: r.Tool, Decides: string(r.Decide), When: r.When, Reason: r.Reason}
		if r.Gate != "" {
			row.Decides, row.When = "gate", r.Gate
		}
		p.Rules = append(p.Rules, row)
	}
	for _, v := range cur.Versions {
		p.Versions = append(p.Versions, templates.PolicyVersionRow{Version: v.Version, Origin: v.Origin, CreatedBy: v.CreatedBy,
			CreatedAt: v.CreatedAt, InForce: v.Version == cur.Version})
	}
	return p, nil
}

// policyPage is GET /policy.
func (s *Server) policyPage(c echo.Context) error {
	p, err := s.policyData(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.PolicyView(p))
}

// policySaveForm is POST /policy (admins): the form's source becomes the version in force, or,
// with draft=1, a version beside it, shown for trying and putting in force later.
func (s *Server) policySaveForm(c echo.Context) error {
	src := c.FormValue("source")
	if s.cfg.PolicyFile != "" {
		return s.policyFlash(c, http.StatusConflict, "This server loads its policy from "+s.cfg.PolicyFile+": edit the file.", src)
	}
	draft := c.FormValue("draft") == "1"
	save := runs.SavePolicy
	if draft {
		save = runs.SavePolicyDraft
	}
	v, created, err := save(c.Request().Context(), s.store, []byte(src), "ui", principal(c).Username)
	var pe *policy.Error
	if errors.As(err, &pe) {
		return s.policyFlash(c, http.StatusUnprocessableEntity, "Not saved: "+pe.Error(), src)
	}
	if err != nil {
		return err
	}
	if draft {
		// POST, redirect, GET: a reload does not save again.
		return c.Redirect(http.StatusSeeOther, "/policy?version="+strconv.FormatInt(v.Version, 10))
	}
	if !created {
		return s.policyFlash(c, http.StatusOK, "Version "+strconv.FormatInt(v.Version, 10)+" has these rules already.", "")
	}
	return c.Redirect(http.StatusSeeOther, "/policy")
}

// policyActivateForm is POST /policy/versions/{version}/activate (admins): the version is put in
// force.
func (s *Server) policyActivateForm(c echo.Context) error {
	if s.cfg.PolicyFile != "" {
		return s.policyFlash(c, http.StatusConflict, "This server loads its policy from "+s.cfg.PolicyFile+": edit the file.", "")
	}
	v, err := strconv.ParseInt(c.Param("version"), 10, 64)
	if err != nil || v <= 0 {
		return s.policyFlash(c, http.StatusNotFound, "There is no version "+c.Param("version")+".", "")
	}
	if _, _, err := s.store.PolicyActivate(c.Request().Context(), v, principal(c).Username); errors.Is(err, store.ErrNotFound) {
		return s.policyFlash(c, http.StatusNotFound, "There is no version "+strconv.FormatInt(v, 10)+".", "")
	} else if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/policy")
}

func (s *Server) policyFlash(c echo.Context, status int, msg, draft string) error {
	p, err := s.policyData(c)
	if err != nil {
		return err
	}
	p.Flash, p.FlashError = msg, status >= 400
	if draft != "" {
		p.Source, p.Draft = draft, draft
	}
	return s.render(c, status, templates.PolicyView(p))
}

// policyWhatIfForm is POST /policy/whatif: the page with the draft's what-if. It changes nothing.
func (s *Server) policyWhatIfForm(c echo.Context) error {
	src := c.FormValue("source")
	last, err := strconv.Atoi(c.FormValue("last"))
	if err != nil || last < 1 || last > runs.MaxWhatIf {
		return s.policyFlash(c, http.StatusUnprocessableEntity, "Interrupts to try it on: a number from 1 to "+strconv.Itoa(runs.MaxWhatIf)+".", src)
	}
	rep, err := runs.PolicyWhatIf(c.Request().Context(), s.store, []byte(src), last)
	var pe *policy.Error
	if errors.As(err, &pe) {
		return s.policyFlash(c, http.StatusUnprocessableEntity, "The draft does not compile: "+pe.Error(), src)
	}
	if err != nil {
		return err
	}
	p, err := s.policyData(c)
	if err != nil {
		return err
	}
	p.Draft, p.Last = src, last
	// A stored version tried as it is stays the one shown, to be put in force from here.
	if v, err := strconv.ParseInt(c.FormValue("version"), 10, 64); err == nil && v > 0 {
		if sel, err := s.store.PolicyGet(c.Request().Context(), v); err == nil && sel.Source == src {
			p.Selected, p.Source = v, src
		}
	}
	w := &templates.WhatIfView{Interrupts: rep.Interrupts, Approve: rep.Approve, Deny: rep.Deny, Ask: rep.Ask,
		AskByRule: rep.AskByRule, Pending: rep.Pending, Errors: rep.Errors}
	for i, d := range rep.Disagreements {
		if i == whatIfShown {
			w.More = len(rep.Disagreements) - whatIfShown
			break
		}
		w.Disagreements = append(w.Disagreements, templates.WhatIfRow{InterruptID: d.InterruptID, Tool: d.Tool, Rule: d.Rule,
			Policy: string(d.Policy), Status: d.Status, ResolvedBy: d.ResolvedBy})
	}
	p.WhatIf = w
	return s.render(c, http.StatusOK, templates.PolicyView(p))
}
