package templates

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// InboxPage is the interrupt inbox's view model: a compact list of the pending interrupts, oldest
// first, and the selected one in full beside it.
type InboxPage struct {
	Page
	Rows []InboxRow
	// Detail is the selected item, nil when nothing is selected.
	Detail *InboxDetail
	// Form is a refused or confirmation-step submit of the detail, shown again.
	Form    *InboxForm
	Tools   []string
	Actions []string
	Tool    string
	Action  string
	// Total is every pending interrupt; Matching those the filters keep.
	Total    int
	Matching int
	// NextURL is the next page of rows, "" on the last.
	NextURL    string
	Flash      string
	FlashError bool
	CanResolve bool
	// BulkError says why a bulk decision was refused as a whole.
	BulkError string
	// Me is the reviewer's name, as claims and presence record it.
	Me string
	// ForMe: only the items the reviewer may decide now are listed (?for=me).
	ForMe bool
}

// InboxRow is one pending interrupt in the compact list.
type InboxRow struct {
	ID        string
	RunID     string
	Tool      string
	Action    string
	Prompt    string
	Age       string
	CreatedAt time.Time
	// ClaimedBy is the reviewer who has claimed it ("" for nobody).
	ClaimedBy string
	// Viewers are the other reviewers who have it open now.
	Viewers  []string
	Risk     string
	Selected bool
	Href     string
	// Routing is the policy rule that routed it to a person, if one did.
	Routing *InboxRouting
}

// InboxRouting is what a policy rule decided about an interrupt it left to people: the rule and
// its version, why, how many distinct approvals it requires and who approved so far, and the
// deadline after which it is denied.
type InboxRouting struct {
	Rule     string
	Version  int
	Decision string // gate, require or ask
	Reason   string
	// Required is the number of distinct approvals a require rule asks for (0 otherwise);
	// Approvers are those who approved so far (the detail only).
	Required  int
	Approvers []string
	ExpiresAt *time.Time
	// TimeLeft is the deadline in words from now ("12m left", "expired"), "" without one.
	TimeLeft string
	// Who says who may decide it ("members of group treasury", "admins"), "" when any reviewer
	// may; Escalate is where the deadline sends it ("admin", "group:leads"), "" when it denies;
	// EscalatedFrom is set once it was escalated.
	Who, Escalate, EscalatedFrom string
}

// Label is the rule as a person reads it: "policy two-approvers v3".
func (r *InboxRouting) Label() string {
	return "policy " + r.Rule + " v" + strconv.Itoa(r.Version)
}

// InboxDetail is the selected interrupt: its interrupt view and what the resolve form needs.
type InboxDetail struct {
	InterruptView
	ClaimedBy string
	ClaimedAt *time.Time
	// Me is the reviewer looking at it: a claim of theirs reads "you".
	Me string
	// Risk says why every decision on it asks for confirmation ("" when none needs it): an amount,
	// or a tool marked irreversible.
	Risk string
	// Fields is the arguments editor generated from the tool's input schema; empty when the schema
	// has no properties to edit one by one.
	Fields []SchemaField
	// Suggestion pre-fills the form, from a replay's suggested resolution.
	Suggestion *InboxSuggestion
	Viewers    []string
	// Metadata is the interrupt's metadata as rows of a table, the question left out (it is shown
	// above it); MetadataJSON keeps the whole document.
	Metadata []MetaRow
	// Routing is the policy rule that routed it, with the approvals so far.
	Routing *InboxRouting
	// Deliveries is its webhook delivery log, oldest attempt first.
	Deliveries []WebhookDeliveryRow
}

// WebhookDeliveryRow is one attempt to post a notification about an interrupt.
type WebhookDeliveryRow struct {
	Event     string
	Target    string // id and redacted URL
	Attempt   int
	At        time.Time
	Status    string // the receiver's status code; empty when none answered
	Took      string
	Error     string
	NextRetry *time.Time
}

// MetaRow is one top-level key of an interrupt's metadata: a string as text, anything else as
// compact JSON (JSON says which).
type MetaRow struct {
	Key   string
	Value string
	JSON  bool
}

// InboxItemPage is one interrupt opened on its own (/inbox/items/{id} in a tab): the layout around
// the same detail the inbox shows beside its list.
type InboxItemPage struct {
	Page
	Detail *InboxDetail
	Opts   InboxItemOpts
}

// InboxSuggestion is the decision a replay suggests, as the form applies it.
type InboxSuggestion struct {
	Action  string // approve, edit, respond or deny
	Input   string
	Output  string
	Comment string
}

// SchemaField is one field of the arguments editor: a top-level property of the input schema.
type SchemaField struct {
	// Pointer is the JSON pointer of the property ("/amount"); validation errors name it.
	Pointer     string
	Name        string
	Description string
	// Kind is text, number, integer, boolean, select or json (edited in the raw JSON only).
	Kind     string
	Value    string
	Checked  bool
	Options  []SchemaOption
	Min      string
	Max      string
	Bounds   string // the bounds in words: "> 0", "1 to 10"
	Required bool
	MaxLen   string
	Error    string
}

// SchemaOption is one value of an enum, as JSON (Value) and as shown (Label).
type SchemaOption struct {
	Value    string
	Label    string
	Selected bool
}

// BulkResult is what became of one item of a bulk decision.
type BulkResult struct {
	ID      string
	RunID   string
	Tool    string
	OK      bool
	Status  string
	Message string
}

// InboxBulkPage is the result page of one bulk decision: what became of each item.
type InboxBulkPage struct {
	Page
	ID      string
	Action  string
	Reason  string
	At      time.Time
	Summary string
	// Failed says some item was not applied.
	Failed  bool
	Results []BulkResult
	// Left is how many items no step has applied yet (a page left while it ran).
	Left int
	// Back is the inbox with the filters the decision was taken under.
	Back string
}

// InboxHistoryPage lists resolved interrupts, most recent first.
type InboxHistoryPage struct {
	Page
	Rows     []InboxHistoryRow
	Tool     string
	Action   string
	Status   string
	By       string
	Query    string
	Statuses []string
	NextURL  string
}

// InboxHistoryRow is one resolved interrupt: who, when, how, and the comment.
type InboxHistoryRow struct {
	ID         string
	RunID      string
	Tool       string
	Action     string
	Prompt     string
	Status     string
	ResolvedBy string
	ResolvedAt *time.Time
	Comment    string
	Resolution string
}

// InboxForm is a resolve form as the reviewer sent it, shown again when it was refused or needs
// confirming: the arguments, the response and the comment are kept, with why.
type InboxForm struct {
	ID string
	// Input is the arguments as submitted; HasInput says the form carried them.
	Input    string
	HasInput bool
	Output   string
	Comment  string
	// Error says, next to the form, why it was refused; FieldErrors say it at the fields they
	// name, by JSON pointer ("/amount").
	Error       string
	FieldErrors map[string]string
	// Resolved, when set, says who resolved the interrupt first: the item is shown closed.
	Resolved string
	// Confirm asks to confirm ConfirmAction, with a reason (ReasonError says what is missing).
	Confirm       bool
	ConfirmAction string
	ReasonError   string
}

// InboxItemOpts is what an inbox detail needs besides its interrupt.
type InboxItemOpts struct {
	CSRF       string
	CanResolve bool
	// Filter is the page's filters as a query ("?tool=…&action=…", or ""): the form keeps them.
	Filter string
	// Form, when it is this item's, is the refused submit to show again.
	Form *InboxForm
}

// InboxFilterQuery is the inbox's filters as a query string: "" without filters.
func InboxFilterQuery(tool, action string) string {
	var parts []string
	if tool != "" {
		parts = append(parts, "tool="+url.QueryEscape(tool))
	}
	if action != "" {
		parts = append(parts, "action="+url.QueryEscape(action))
	}
	if len(parts) == 0 {
		return ""
	}
	return "?" + strings.Join(parts, "&")
}

// EmptyReason says why the list is empty: nothing waits, or the filters hide what waits.
func (p InboxPage) EmptyReason() string {
	if p.Total == 0 || (p.Tool == "" && p.Action == "") {
		return "Nothing waits for a reviewer."
	}
	var f []string
	if p.Tool != "" {
		f = append(f, "tool="+p.Tool)
	}
	if p.Action != "" {
		f = append(f, "action="+p.Action)
	}
	others := p.Total - p.Matching
	wait := "others wait"
	if others == 1 {
		wait = "other waits"
	}
	return "No item matches " + strings.Join(f, ", ") + "; " + strconv.Itoa(others) + " " + wait + "."
}

func (o InboxItemOpts) form(id string) *InboxForm {
	if o.Form != nil && o.Form.ID == id {
		return o.Form
	}
	return nil
}

func (o InboxItemOpts) closed(id string) bool {
	f := o.form(id)
	return f != nil && f.Resolved != ""
}

func (o InboxItemOpts) input(d *InboxDetail) string {
	if f := o.form(d.ID); f != nil && f.HasInput {
		return f.Input
	}
	if d.Suggestion != nil && d.Suggestion.Input != "" {
		return d.Suggestion.Input
	}
	return d.InputJSON
}

func (o InboxItemOpts) output(d *InboxDetail) string {
	if f := o.form(d.ID); f != nil {
		return f.Output
	}
	if d.Suggestion != nil {
		return d.Suggestion.Output
	}
	return ""
}

func (o InboxItemOpts) comment(d *InboxDetail) string {
	if f := o.form(d.ID); f != nil {
		return f.Comment
	}
	if d.Suggestion != nil {
		return d.Suggestion.Comment
	}
	return ""
}

func (o InboxItemOpts) formError(id string) string {
	if f := o.form(id); f != nil {
		return f.Error
	}
	return ""
}

func (o InboxItemOpts) confirming(id string) bool {
	f := o.form(id)
	return f != nil && f.Confirm
}

func (o InboxItemOpts) confirmAction(id string) string {
	if f := o.form(id); f != nil && f.ConfirmAction != "" {
		return f.ConfirmAction
	}
	return "deny"
}

func (o InboxItemOpts) reasonError(id string) string {
	if f := o.form(id); f != nil {
		return f.ReasonError
	}
	return ""
}

// confirmLabel is the confirm button's text for an action.
func confirmLabel(action string) string {
	switch action {
	case "approve":
		return "Confirm approve"
	case "edit":
		return "Confirm approve edited"
	case "respond":
		return "Confirm respond"
	}
	return "Confirm deny"
}
