package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// interruptRisk says why every decision on an interrupt asks for confirmation, or "" when none
// needs it. Two things make an item risky: an amount, that is a numeric "amount" among the tool's
// arguments; and a tool marked irreversible, that is interrupt metadata with "irreversible": true
// (a tool says so in what it passes to Interrupt, or in WithRequestMetadata). The metadata is
// stored with each interrupt, so the mark works for tools of any program sharing the database.
func interruptRisk(it *store.Interrupt) string {
	var why []string
	var md map[string]any
	if json.Unmarshal(it.Metadata, &md) == nil {
		if v, _ := md["irreversible"].(bool); v {
			why = append(why, "the tool is marked irreversible")
		}
	}
	var in map[string]any
	dec := json.NewDecoder(bytes.NewReader(it.Input))
	dec.UseNumber()
	if dec.Decode(&in) == nil {
		if n, ok := in["amount"].(json.Number); ok {
			amount := n.String()
			if cur, ok := in["currency"].(string); ok && cur != "" {
				amount += " " + cur
			}
			why = append(why, "it moves an amount ("+amount+")")
		}
	}
	return strings.Join(why, "; ")
}

// inboxSuggestion reads a replay's suggested resolution (the original run's decision) as the form
// applies it: nil when there is none.
func inboxSuggestion(raw json.RawMessage) *templates.InboxSuggestion {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s struct {
		Status     string `json:"status"`
		Comment    string `json:"comment"`
		Resolution struct {
			Input  json.RawMessage `json:"input"`
			Output json.RawMessage `json:"output"`
		} `json:"resolution"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	sg := &templates.InboxSuggestion{Comment: s.Comment}
	switch s.Status {
	case store.InterruptApproved:
		sg.Action = "approve"
	case store.InterruptEdited:
		sg.Action, sg.Input = "edit", prettyJSON(s.Resolution.Input)
	case store.InterruptResponded:
		sg.Action, sg.Output = "respond", prettyJSON(s.Resolution.Output)
	case store.InterruptDenied:
		sg.Action = "deny"
	default:
		return nil
	}
	return sg
}

// fieldSchema is the part of a JSON Schema the arguments editor reads.
type fieldSchema struct {
	Type             any               `json:"type"`
	Description      string            `json:"description"`
	Enum             []json.RawMessage `json:"enum"`
	Minimum          *json.Number      `json:"minimum"`
	Maximum          *json.Number      `json:"maximum"`
	ExclusiveMinimum *json.Number      `json:"exclusiveMinimum"`
	ExclusiveMaximum *json.Number      `json:"exclusiveMaximum"`
	MaxLength        *int              `json:"maxLength"`
	Required         []string          `json:"required"`
}

// schemaFields builds the arguments editor from a tool's input schema: one field per top-level
// property, required ones first, with the value from input. Enums become selects, numbers
// carry their bounds; objects and arrays are edited in the raw JSON. Nil when the schema is not
// an object with properties.
func schemaFields(schema json.RawMessage, input string) []templates.SchemaField {
	if len(schema) == 0 {
		return nil
	}
	var root struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &root) != nil || len(root.Properties) == 0 {
		return nil
	}
	// The required properties in the schema's order, then the others by name: the schema comes
	// from jsonb, which does not keep the properties' order, but keeps the required list's.
	var names []string
	for _, k := range root.Required {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	rest := objectKeys(root.Properties)
	slices.Sort(rest)
	for _, k := range rest {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	var props map[string]json.RawMessage
	if json.Unmarshal(root.Properties, &props) != nil {
		return nil
	}
	values := map[string]json.RawMessage{}
	_ = json.Unmarshal([]byte(input), &values)
	var out []templates.SchemaField
	for _, name := range names {
		var fs fieldSchema
		dec := json.NewDecoder(bytes.NewReader(props[name]))
		dec.UseNumber()
		if dec.Decode(&fs) != nil {
			continue
		}
		f := templates.SchemaField{Pointer: "/" + jsonPointerEscape(name), Name: name, Description: fs.Description,
			Required: slices.Contains(root.Required, name)}
		raw, has := values[name]
		typ, _ := fs.Type.(string)
		switch {
		case len(fs.Enum) > 0:
			f.Kind = "select"
			if !has {
				f.Options = append(f.Options, templates.SchemaOption{Value: "", Label: "—", Selected: true})
			}
			for _, e := range fs.Enum {
				label := string(e)
				var str string
				if json.Unmarshal(e, &str) == nil {
					label = str
				}
				f.Options = append(f.Options, templates.SchemaOption{Value: string(e), Label: label, Selected: has && sameJSON(string(e), string(raw))})
			}
		case typ == "number" || typ == "integer":
			f.Kind = typ
			if has {
				f.Value = strings.TrimSpace(string(raw))
			}
			var lo, hi []string
			if fs.Minimum != nil {
				f.Min = fs.Minimum.String()
				lo = append(lo, "≥ "+f.Min)
			}
			if fs.ExclusiveMinimum != nil {
				lo = append(lo, "> "+fs.ExclusiveMinimum.String())
				if f.Min == "" && typ == "integer" {
					if n, err := fs.ExclusiveMinimum.Int64(); err == nil {
						f.Min = strconv.FormatInt(n+1, 10)
					}
				}
			}
			if fs.Maximum != nil {
				f.Max = fs.Maximum.String()
				hi = append(hi, "≤ "+f.Max)
			}
			if fs.ExclusiveMaximum != nil {
				hi = append(hi, "< "+fs.ExclusiveMaximum.String())
				if f.Max == "" && typ == "integer" {
					if n, err := fs.ExclusiveMaximum.Int64(); err == nil {
						f.Max = strconv.FormatInt(n-1, 10)
					}
				}
			}
			f.Bounds = strings.Join(append(lo, hi...), ", ")
		case typ == "boolean":
			f.Kind = "boolean"
			f.Checked = has && string(raw) == "true"
		case typ == "string":
			f.Kind = "text"
			if has {
				var str string
				if json.Unmarshal(raw, &str) == nil {
					f.Value = str
				}
			}
			if fs.MaxLength != nil {
				f.Bounds = fmt.Sprintf("at most %d characters", *fs.MaxLength)
			}
		default:
			f.Kind = "json"
		}
		out = append(out, f)
	}
	return out
}

// objectKeys lists a JSON object's keys in the order written.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// presenceTTL is how long an inbox tab counts as having an item open without a heartbeat; the
// script beats every 15 s.
const presenceTTL = 45 * time.Second

// inboxPresence is who has which inbox item open, by browser tab, in this process. The live hub
// carries every change to the other inboxes, on this instance and the others (LISTEN/NOTIFY);
// a page rendered on another instance learns of a viewer at their next heartbeat.
type inboxPresence struct {
	mu   sync.Mutex
	tabs map[string]presenceTab
}

type presenceTab struct {
	user string
	item string
	seen time.Time
}

// open records that tab (of user) has item open ("" for none), and returns the items whose
// viewers changed.
func (p *inboxPresence) open(tab, user, item string, now time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tabs == nil {
		p.tabs = map[string]presenceTab{}
	}
	var changed []string
	for k, t := range p.tabs {
		if now.Sub(t.seen) > presenceTTL {
			delete(p.tabs, k)
			changed = append(changed, t.item)
		}
	}
	old, had := p.tabs[tab]
	if item == "" {
		delete(p.tabs, tab)
	} else {
		p.tabs[tab] = presenceTab{user: user, item: item, seen: now}
	}
	if had && old.item != item {
		changed = append(changed, old.item)
	}
	if item != "" && (!had || old.item != item) {
		changed = append(changed, item)
	}
	slices.Sort(changed)
	return slices.Compact(changed)
}

// viewersByTab is who has item open, tab by tab.
func (p *inboxPresence) viewersByTab(item string, now time.Time) []event.Viewer {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []event.Viewer{}
	for k, t := range p.tabs {
		if t.item == item && now.Sub(t.seen) <= presenceTTL {
			out = append(out, event.Viewer{Tab: k, User: t.user})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User+out[i].Tab < out[j].User+out[j].Tab })
	return out
}

// viewers is the names of the reviewers other than me who have item open.
func (p *inboxPresence) viewers(item, me string, now time.Time) []string {
	var names []string
	for _, v := range p.viewersByTab(item, now) {
		if v.User != me && !slices.Contains(names, v.User) {
			names = append(names, v.User)
		}
	}
	return names
}

// inboxPresenceUpdate is POST /inbox/presence (tab=, item=): the inbox script says which item its
// tab has open, on every change and every 15 s, and item= empty when it leaves. Each change is
// announced on the inbox topic as inbox.presence.
func (s *Server) inboxPresenceUpdate(c echo.Context) error {
	tab := c.FormValue("tab")
	item := c.FormValue("item")
	if tab == "" || len(tab) > 64 {
		return Errorf(http.StatusBadRequest, "bad_request", "presence needs tab (at most 64 bytes)")
	}
	if item != "" {
		if _, err := uuid.Parse(item); err != nil {
			return Errorf(http.StatusBadRequest, "bad_request", "item %q is not an interrupt id", item)
		}
	}
	now := time.Now()
	for _, id := range s.presence.open(tab, me(c), item, now) {
		if s.deps.Live != nil && id != "" {
			s.deps.Live.Publish(uuid.Nil, event.InboxPresenceData{InterruptID: id, Viewers: s.presence.viewersByTab(id, now)})
		}
	}
	return c.NoContent(http.StatusNoContent)
}
