package templates

// ActionView is one registered action with its schemas and run form.
type ActionView struct {
	// ID is the article's element id, unique on the page ("action-countdown").
	ID           string
	Key          string
	Name         string
	Type         string
	Description  string
	InputSchema  string
	OutputSchema string
	Example      string
	Runnable     bool
	// RunHere is true when the page can run the action at once and show its output in place,
	// through the reflection API (a flow as a durable run, a tool, model or prompt of this
	// program in the serving process).
	RunHere bool
	// LastRuns are the action's latest runs, newest first.
	LastRuns []RunListRow
	// Fields are the input form built from the input schema, kept in step with the JSON.
	Fields []SchemaField
}

// ActionsPage is the actions catalogue's view model.
type ActionsPage struct {
	Page
	Groups   []ActionGroup
	Error    string
	ErrorFor string
	// FieldError is the server's refusal of the ErrorFor action's input at one field of its
	// form: the field's JSON pointer ("/destination") and what it must be.
	FieldError        string
	FieldErrorPointer string
	Input             string
	CanRun            bool
	// Apps are the Genkit apps Loupe attached to, each with its actions.
	Apps []AppSection
}

// AppSection is one Genkit app on the actions page: live with its actions, or gone.
type AppSection struct {
	Name    string
	Project string
	Live    bool
	Status  string
	Groups  []ActionGroup
}

// ActionGroup is the actions of one type.
type ActionGroup struct {
	Type    string
	Actions []ActionView
}

// fieldErrorOf is the server's field error for the action's form, by pointer, when it refused that
// action's input at a field.
func (p ActionsPage) fieldErrorOf(key string) map[string]string {
	if p.ErrorFor != key || p.FieldErrorPointer == "" {
		return nil
	}
	return map[string]string{p.FieldErrorPointer: p.FieldError}
}
