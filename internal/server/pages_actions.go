package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
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

// actionTypeOrder is the order of the catalogue's sections.
var actionTypeOrder = []engine.ActionType{engine.ActionTypeFlow, engine.ActionTypePrompt, engine.ActionTypeTool,
	engine.ActionTypeToolV2, engine.ActionTypeModel, engine.ActionTypeUtil, engine.ActionTypeDynamic}

func (s *Server) actionsData(c echo.Context) templates.ActionsPage {
	pr := principal(c)
	p := templates.ActionsPage{Page: s.page(c, "Actions", "actions"), CanRun: pr != nil && auth.Allows(pr.Role, store.RoleReviewer)}
	// A Genkit app's actions (internal/genkitapp) are listed under the app, the others by type.
	var own []*engine.ActionDesc
	byApp := map[string][]*engine.ActionDesc{}
	for _, a := range s.actions(c.Request().Context()) {
		if app, ok := a.Metadata[genkitapp.MetaApp].(string); ok && app != "" {
			byApp[app] = append(byApp[app], a)
			continue
		}
		own = append(own, a)
	}
	p.Groups = groupActions(own)
	s.playground(c.Request().Context(), p.Groups)
	if s.deps.GenkitApps != nil {
		for _, app := range s.deps.GenkitApps.Apps() {
			v := templates.AppSection{Name: app.Name, Live: app.Live, Project: app.Project}
			if app.Live {
				v.Status = fmt.Sprintf("live at %s (pid %d, %s) since %s", app.URL, app.PID, app.GenkitVersion, app.Since.Local().Format("15:04:05"))
				v.Groups = groupActions(byApp[app.Name])
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
		p.Apps = append(p.Apps, templates.AppSection{Name: name, Live: true, Status: "attached by another Loupe process", Groups: groupActions(byApp[name])})
	}
	actionIDs(&p)
	return p
}

// actionIDs gives every action of the page an element id of its own: "action-<name>" for this
// program's, "action-<app>-<name>" for a Genkit app's, with the type added where a name repeats
// (a tool and its /tool.v2/ twin, a prompt and its executable prompt).
func actionIDs(p *templates.ActionsPage) {
	seen := map[string]bool{}
	assign := func(groups []templates.ActionGroup, prefix string) {
		for _, g := range groups {
			for i := range g.Actions {
				a := &g.Actions[i]
				id := prefix + a.Name
				for n := 2; seen[id]; n++ {
					id = fmt.Sprintf("%s%s-%s", prefix, a.Type, a.Name)
					if n > 2 {
						id += "-" + strconv.Itoa(n)
					}
				}
				seen[id], a.ID = true, id
			}
		}
	}
	assign(p.Groups, "action-")
	for _, app := range p.Apps {
		assign(app.Groups, "action-"+app.Name+"-")
	}
}

// groupActions sorts actions into sections by type. A Genkit app's actions can all be run; of
// Loupe's own, the flows.
func groupActions(list []*engine.ActionDesc) []templates.ActionGroup {
	byType := map[engine.ActionType][]templates.ActionView{}
	var extra []engine.ActionType
	for _, a := range list {
		_, fromApp := a.Metadata[genkitapp.MetaApp]
		v := templates.ActionView{Key: a.Key, Name: a.Name, Type: string(a.Type), Description: a.Description,
			Runnable: a.Type == engine.ActionTypeFlow || fromApp}
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
		if _, ok := byType[a.Type]; !ok && !containsType(actionTypeOrder, a.Type) {
			extra = append(extra, a.Type)
		}
		byType[a.Type] = append(byType[a.Type], v)
	}
	var groups []templates.ActionGroup
	for _, t := range append(append([]engine.ActionType{}, actionTypeOrder...), extra...) {
		if len(byType[t]) > 0 {
			groups = append(groups, templates.ActionGroup{Type: string(t), Actions: byType[t]})
		}
	}
	return groups
}

// playground marks the actions the page can run in place, and lists each flow's last runs.
func (s *Server) playground(ctx context.Context, groups []templates.ActionGroup) {
	reg := s.deps.Runs.Registry()
	for gi := range groups {
		for ai := range groups[gi].Actions {
			a := &groups[gi].Actions[ai]
			flow := a.Type == string(engine.ActionTypeFlow)
			a.RunHere = flow && strings.HasPrefix(a.Key, "/") || reg.Lookup(a.Key) != nil && a.Type != string(engine.ActionTypeUtil)
			if !flow {
				continue
			}
			recent, _, err := s.store.RunList(ctx, store.RunListParams{Action: a.Key, Limit: 5})
			if err != nil {
				s.log.Warn("actions page: last runs", "action", a.Key, "err", err)
				continue
			}
			for _, r := range recent {
				a.LastRuns = append(a.LastRuns, runListRow(r, 0))
			}
		}
	}
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

func containsType(list []engine.ActionType, t engine.ActionType) bool {
	for _, x := range list {
		if x == t {
			return true
		}
	}
	return false
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

// actionsPage is GET /actions: the registered actions with their schemas and run forms.
func (s *Server) actionsPage(c echo.Context) error {
	return s.render(c, http.StatusOK, templates.ActionsView(s.actionsData(c)))
}

// actionRun is POST /actions/run: start a run from the form and open its live page. Invalid input
// comes back on the form, with the server's reason.
func (s *Server) actionRun(c echo.Context) error {
	action, input := c.FormValue("action"), strings.TrimSpace(c.FormValue("input"))
	// failAt shows msg on the action's form, and, when it names a field of the form, the field's
	// part of it at that field.
	failAt := func(msg, pointer, fieldMsg string) error {
		p := s.actionsData(c)
		p.Error, p.ErrorFor, p.Input = msg, action, input
		p.FieldErrorPointer, p.FieldError = pointer, fieldMsg
		return s.render(c, http.StatusUnprocessableEntity, templates.ActionsView(p))
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
	run, err := s.deps.Runs.StartRun(c.Request().Context(), runs.StartParams{Action: action, Input: json.RawMessage(input), CreatedBy: principal(c).Username})
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
