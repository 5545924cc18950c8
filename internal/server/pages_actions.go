package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// actionTypeOrder is the order of the list's types.
var actionTypeOrder = []engine.ActionType{engine.ActionTypeFlow, engine.ActionTypePrompt, engine.ActionTypeTool,
	engine.ActionTypeToolV2, engine.ActionTypeModel, engine.ActionTypeUtil, engine.ActionTypeDynamic}

// actionLastRuns is how many of an action's runs its page lists.
const actionLastRuns = 10

// actionsData is the actions list: every action as a row, this program's (and its workers') by
// type then name, then each Genkit app's under the app. Rows the query or the type leave out are
// marked hidden, not dropped, so that the script can widen the filter as one types.
func (s *Server) actionsData(c echo.Context, query, typ string) templates.ActionsPage {
	p := templates.ActionsPage{Page: s.page(c, "Actions", "actions"), Query: query, Type: typ}
	q := strings.ToLower(strings.TrimSpace(query))
	counts := map[string]int{}
	var own []templates.ActionRow
	byApp := map[string][]templates.ActionRow{}
	list := s.actions(c.Request().Context())
	slices.SortStableFunc(list, func(a, b *engine.ActionDesc) int {
		if d := typeRank(a.Type) - typeRank(b.Type); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, a := range list {
		app, _ := a.Metadata[genkitapp.MetaApp].(string)
		row := templates.ActionRow{Key: a.Key, URL: actionURL(a.Key), Name: a.Name, Type: string(a.Type), Description: a.Description, App: app}
		if pm, ok := a.Metadata["prompt"].(map[string]any); ok {
			row.LoadError, _ = pm[engine.MetaLoadError].(string)
		}
		if row.Name == "" {
			row.Name = a.Key
		}
		counts[row.Type]++
		p.Total++
		row.Hidden = typ != "" && row.Type != typ ||
			q != "" && !strings.Contains(strings.ToLower(row.Key+" "+row.Name+" "+row.Description+" "+row.App), q)
		if !row.Hidden {
			p.Shown++
		}
		if app != "" {
			byApp[app] = append(byApp[app], row)
		} else {
			own = append(own, row)
		}
	}
	p.Own = own
	p.Types = typeChoices(counts, query, typ)
	if s.deps.GenkitApps != nil {
		for _, app := range s.deps.GenkitApps.Apps() {
			v := templates.AppSection{Name: app.Name, Live: app.Live, Project: app.Project}
			if app.Live {
				v.Status = fmt.Sprintf("live at %s (pid %d, %s) since %s", app.URL, app.PID, app.GenkitVersion, app.Since.Local().Format("15:04:05"))
				v.Actions = byApp[app.Name]
			} else {
				v.Status = fmt.Sprintf("gone since %s: %s. Its runs wait until it is back.", app.Since.Local().Format("15:04:05"), app.Reason)
			}
			delete(byApp, app.Name)
			p.Apps = append(p.Apps, v)
		}
	}
	// Apps another Loupe process attached to: their actions, without a status.
	names := make([]string, 0, len(byApp))
	for name := range byApp {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p.Apps = append(p.Apps, templates.AppSection{Name: name, Live: true, Status: "attached by another Loupe process", Actions: byApp[name]})
	}
	return p
}

// typeRank is a type's place in the list: actionTypeOrder's, others after.
func typeRank(t engine.ActionType) int {
	if i := slices.Index(actionTypeOrder, t); i >= 0 {
		return i
	}
	return len(actionTypeOrder)
}

// typeChoices is the type filter: every type that has actions, with how many, each a link that
// keeps the query.
func typeChoices(counts map[string]int, query, current string) []templates.TypeChoice {
	link := func(t string) string {
		v := url.Values{}
		if query != "" {
			v.Set("q", query)
		}
		if t != "" {
			v.Set("type", t)
		}
		if len(v) == 0 {
			return "/actions"
		}
		return "/actions?" + v.Encode()
	}
	total := 0
	types := make([]string, 0, len(counts))
	for t, n := range counts {
		total += n
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b string) int {
		if d := typeRank(engine.ActionType(a)) - typeRank(engine.ActionType(b)); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	out := []templates.TypeChoice{{Label: "all", Count: total, URL: link(""), Current: current == ""}}
	for _, t := range types {
		out = append(out, templates.TypeChoice{Type: t, Label: t, Count: counts[t], URL: link(t), Current: t == current})
	}
	return out
}

// actionURL is the address of an action's page. This program's keys ("/flow/travelAgent") lose
// their leading slash ("/actions/flow/travelAgent"); a Genkit app's ("genkit-js-peer:/tool/x")
// keep their colon ("/actions/genkit-js-peer:/tool/x"). Each segment is path-escaped and every
// other colon written %3A, so that the one literal ":/" left is the app's, and actionKeyOf reads
// the key back whatever its name holds (slashes, colons, spaces, "?", "#", "%").
func actionURL(key string) string {
	// An app's name never starts with a slash; this program's keys always do.
	if app, gk, ok := genkitapp.SplitKey(key); ok && !strings.HasPrefix(app, "/") {
		return "/actions/" + escapeKeyPath(app) + ":" + escapeKeyPath(gk)
	}
	if rest, ok := strings.CutPrefix(key, "/"); ok {
		return "/actions/" + escapeKeyPath(rest)
	}
	// A key without a leading slash is none of Loupe's or Genkit's; %2F keeps it apart.
	return "/actions/%2F" + escapeKeyPath(key)
}

func escapeKeyPath(p string) string {
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		segs[i] = strings.ReplaceAll(url.PathEscape(seg), ":", "%3A")
	}
	return strings.Join(segs, "/")
}

// actionKeyOf is the key of the action whose page the escaped path after "/actions/" names (see
// actionURL).
func actionKeyOf(escaped string) (string, error) {
	if i := strings.Index(escaped, ":/"); i > 0 {
		app, err := url.PathUnescape(escaped[:i])
		if err != nil {
			return "", err
		}
		gk, err := url.PathUnescape(escaped[i+1:])
		if err != nil {
			return "", err
		}
		return app + ":" + gk, nil
	}
	if rest, ok := strings.CutPrefix(escaped, "%2F"); ok {
		return url.PathUnescape(rest)
	}
	key, err := url.PathUnescape(escaped)
	return "/" + key, err
}

// actionView is an action's run form and schemas. A Genkit app's actions can all be run; of
// Loupe's own, the flows as runs, and any action of the serving program in place.
func (s *Server) actionView(a *engine.ActionDesc) templates.ActionView {
	_, fromApp := a.Metadata[genkitapp.MetaApp]
	v := templates.ActionView{Key: a.Key, Name: a.Name, Type: string(a.Type), Description: a.Description,
		Runnable: a.Type == engine.ActionTypeFlow || fromApp}
	if v.Name == "" {
		v.Name = a.Key
	}
	if note, ok := a.Metadata["loupe:runs"].(string); ok && v.Description == "" {
		v.Description = "Running it " + note + "."
	} else if ok {
		v.Description += " (running it " + note + ")"
	}
	switch {
	case a.InputSchema != nil:
		v.InputSchema = prettyJSON(a.InputSchema.Raw())
		v.Example = prettyJSON(mustJSON(exampleFor(a.InputSchema.Raw())))
		v.Fields = schemaFields(a.InputSchema.Raw(), v.Example)
	case a.Type == engine.ActionTypeModel:
		// A model takes a request: start from one user message, as Genkit's Dev UI does.
		v.Example = prettyJSON(json.RawMessage(`{"messages":[{"role":"user","content":[{"text":"Hello"}]}]}`))
	default:
		v.Example = "null"
	}
	if a.OutputSchema != nil {
		v.OutputSchema = prettyJSON(a.OutputSchema.Raw())
	}
	flow := a.Type == engine.ActionTypeFlow
	v.RunHere = flow && strings.HasPrefix(a.Key, "/") || s.deps.Runs.Registry().Lookup(a.Key) != nil && a.Type != engine.ActionTypeUtil
	return v
}

// actionData is an action's page, its form holding input and context; nil when no action has
// the key.
func (s *Server) actionData(c echo.Context, key, input, actx string) (*templates.ActionPage, error) {
	ctx := c.Request().Context()
	var desc *engine.ActionDesc
	list := s.actions(ctx)
	for _, a := range list {
		if a.Key == key {
			desc = a
			break
		}
	}
	if desc == nil {
		return nil, Errorf(http.StatusNotFound, "not_found", "no action %q: it is not registered, or the program that has it is not running", key)
	}
	pr := principal(c)
	v := s.actionView(desc)
	p := &templates.ActionPage{Page: s.page(c, v.Name+" · Actions", "actions"), Action: v, URL: actionURL(key),
		CanRun: pr != nil && auth.Allows(pr.Role, store.RoleReviewer), Input: input, Context: actx}
	if p.Input == "" {
		p.Input = v.Example
	}
	if app, ok := desc.Metadata[genkitapp.MetaApp].(string); ok {
		p.App = app
		if s.deps.GenkitApps != nil {
			for _, a := range s.deps.GenkitApps.Apps() {
				if a.Name == app && a.Live {
					p.AppStatus = "live at " + a.URL
				}
			}
		}
	}
	if desc.Type == engine.ActionTypePrompt && p.App == "" {
		if err := s.promptPlayground(ctx, p, desc, list); err != nil {
			return nil, err
		}
	}
	recent, _, err := s.store.RunList(ctx, store.RunListParams{Action: key, Limit: actionLastRuns})
	if err != nil {
		return nil, fmt.Errorf("last runs of %s: %w", key, err)
	}
	for _, r := range recent {
		row := templates.ActionRun{RunListRow: s.runListRow(r, 0)}
		if r.Status == store.RunInterrupted {
			list, err := s.store.InterruptListByRun(ctx, r.ID)
			if err != nil {
				return nil, fmt.Errorf("last runs of %s: %w", key, err)
			}
			for _, it := range list {
				if it.Status == store.InterruptPending {
					row.Inbox = "/inbox?sel=" + it.ID.String()
					break
				}
			}
		}
		p.LastRuns = append(p.LastRuns, row)
	}
	return p, nil
}

// actions lists this program's actions and those live workers announce; when the catalogue cannot
// be read, the page shows this program's own.
func (s *Server) actions(ctx context.Context) []*engine.ActionDesc {
	list, err := s.deps.Runs.Actions(ctx)
	if err != nil {
		s.log.Warn("list the action catalogue", "err", err)
	}
	return list
}

// exampleFor builds an input from a JSON schema: its default, else its first example, else an
// object of its properties' examples, else the type's zero value.
func exampleFor(raw json.RawMessage) any {
	var sch map[string]any
	if json.Unmarshal(raw, &sch) != nil {
		return nil
	}
	return exampleOf(sch, 0)
}

func exampleOf(sch map[string]any, depth int) any {
	if v, ok := sch["default"]; ok {
		return v
	}
	if ex, ok := sch["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	if enum, ok := sch["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := sch["type"].(string)
	switch typ {
	case "object":
		// Only the required properties: an optional one left out means "not set", which a
		// pre-filled value (false, 0, "") would not (travelAgent's approve:false takes the deny path).
		out := map[string]any{}
		props, _ := sch["properties"].(map[string]any)
		required, _ := sch["required"].([]any)
		if depth < 5 {
			for k, v := range props {
				if ps, ok := v.(map[string]any); ok && slices.Contains(required, any(k)) {
					out[k] = exampleOf(ps, depth+1)
				}
			}
		}
		return out
	case "array":
		return []any{}
	case "string":
		return ""
	case "integer", "number":
		if m, ok := sch["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	}
	return nil
}

// actionsPage is GET /actions[?q=&type=]: the list of actions.
func (s *Server) actionsPage(c echo.Context) error {
	return s.render(c, http.StatusOK, templates.ActionsView(s.actionsData(c, c.QueryParam("q"), c.QueryParam("type"))))
}

// actionPage is GET /actions/{key} (actionURL): one action's run form, schemas and last runs.
func (s *Server) actionPage(c echo.Context) error {
	escaped, _ := strings.CutPrefix(c.Request().URL.EscapedPath(), "/actions/")
	key, err := actionKeyOf(escaped)
	if err != nil {
		return Errorf(http.StatusBadRequest, "bad_request", "the action's address is not a valid key: %v", err)
	}
	p, err := s.actionData(c, key, "", "")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.ActionPageView(*p))
}

// actionRun is POST /actions/run: start a run from an action's form and open its live page.
// Invalid input or context comes back on the form, with the server's reason.
func (s *Server) actionRun(c echo.Context) error {
	action, input := c.FormValue("action"), strings.TrimSpace(c.FormValue("input"))
	actx := strings.TrimSpace(c.FormValue("context"))
	// failAt shows msg on the action's form, and, when it names a field of the form, the field's
	// part of it at that field.
	failAt := func(msg, pointer, fieldMsg string) error {
		p, err := s.actionData(c, action, input, actx)
		if err != nil {
			return err
		}
		p.Error, p.FieldErrorPointer, p.FieldError = msg, pointer, fieldMsg
		return s.render(c, http.StatusUnprocessableEntity, templates.ActionPageView(*p))
	}
	fail := func(msg string) error { return failAt(msg, "", "") }
	if input == "" {
		input = "null"
	}
	if !json.Valid([]byte(input)) {
		return fail("The input is not valid JSON.")
	}
	if err := store.CheckJSON("input", json.RawMessage(input)); err != nil {
		return fail("Invalid input: " + err.Error() + ".")
	}
	var runCtx json.RawMessage
	if actx != "" {
		var obj map[string]any
		if json.Unmarshal([]byte(actx), &obj) != nil {
			return fail("The context is not a JSON object.")
		}
		if err := store.CheckJSON("context", json.RawMessage(actx)); err != nil {
			return fail("Invalid context: " + err.Error() + ".")
		}
		runCtx = json.RawMessage(actx)
	}
	run, err := s.deps.Runs.StartRun(c.Request().Context(), runs.StartParams{Action: action, Input: json.RawMessage(input),
		Context: runCtx, CreatedBy: principal(c).Username})
	var ve *runs.ValidationError
	switch {
	case errors.As(err, &ve):
		if ptr, ok := strings.CutPrefix(ve.Field, "input"); ok && strings.HasPrefix(ptr, "/") {
			return failAt("Invalid input: "+ve.Error(), ptr, ve.Message)
		}
		return fail("Invalid input: " + ve.Error())
	case errors.Is(err, runs.ErrInvalid):
		return fail(err.Error())
	case err != nil:
		return err
	}
	if s.deps.Live != nil {
		s.deps.Live.Publish(run.ID, event.RunStatusData{Status: run.Status})
	}
	return c.Redirect(http.StatusSeeOther, "/runs/"+run.ID.String())
}
