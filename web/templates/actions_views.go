package templates

import "time"

// ActionView is one registered action with its schemas and run form.
type ActionView struct {
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
	// Fields are the input form built from the input schema, kept in step with the JSON.
	Fields []SchemaField
}

// ActionRow is one action of the actions list: a compact row linking to its page.
type ActionRow struct {
	Key         string
	URL         string
	Name        string
	Type        string
	Description string
	// LoadError is the error of a prompt whose .prompt file did not load ("file:line: why").
	LoadError string
	// App is the Genkit app the action belongs to, empty for this program's and its workers'.
	App string
	// Hidden is true when the list's filter leaves the row out.
	Hidden bool
}

// ActionsPage is the actions list's view model: this program's actions and each Genkit app's,
// filtered by Query (a substring of key, name or description) and Type.
type ActionsPage struct {
	Page
	Query string
	Type  string
	// Types are the type filter's choices, with how many actions of each match Query.
	Types []TypeChoice
	// Own are this program's actions (and its workers'), by type then name.
	Own []ActionRow
	// Apps are the Genkit apps Loupe attached to, each with its actions that match.
	Apps []AppSection
	// Shown and Total count the listed actions and all of them.
	Shown, Total int
}

// TypeChoice is one entry of the type filter.
type TypeChoice struct {
	Type    string // "" for every type
	Label   string
	Count   int
	URL     string
	Current bool
}

// AppSection is one Genkit app on the actions list: live with its actions, or gone.
type AppSection struct {
	Name    string
	Project string
	Live    bool
	Status  string
	Actions []ActionRow
}

// ActionPage is one action's page: its run form, its schemas and its last runs.
type ActionPage struct {
	Page
	Action ActionView
	// URL is the page's own address (ActionURL of the key).
	URL string
	// App and AppStatus name the Genkit app the action belongs to and how it is.
	App, AppStatus string
	CanRun         bool
	// Error is the server's refusal of the last input sent from the form; FieldError is its part
	// at one field, the field's JSON pointer in FieldErrorPointer.
	Error             string
	FieldError        string
	FieldErrorPointer string
	// Input and Context are what the form sends: the example, or what was typed before a refusal.
	Input   string
	Context string
	// LastRuns are the action's newest runs, newest first.
	LastRuns []ActionRun
	// Playground is set for a prompt loaded from a .prompt file; PromptNote says why a prompt
	// has none (defined in Go code).
	Playground *PromptPlayground
	PromptNote string
}

// ActionRun is one of an action's last runs; a run that waits for a reviewer links to its inbox
// item.
type ActionRun struct {
	RunListRow
	// Inbox is the address of the run's first pending interrupt in the inbox, when it waits.
	Inbox string
}

// fieldErrors is the server's field error for the form, by pointer.
func (p ActionPage) fieldErrors() map[string]string {
	if p.FieldErrorPointer == "" {
		return nil
	}
	return map[string]string{p.FieldErrorPointer: p.FieldError}
}

// PromptPlayground is the playground of a prompt loaded from a .prompt file: its file's text to
// edit, the model fields written into its front matter, an input, and its last runs to compare.
type PromptPlayground struct {
	Name string
	// File is the prompt's file relative to its directory; Source, its text.
	File   string
	Source string
	// API is the prompt's address under /api/v1/prompts/.
	API string
	// Input is the example input the form starts from.
	Input string
	// Model, Temperature, MaxOutputTokens and Tools are the front matter's, as the fields show
	// them ("" when unset; tools comma-separated).
	Model, Temperature, MaxOutputTokens, Tools string
	// Models and ToolNames are the registered models and tools, offered in the fields' lists.
	Models, ToolNames []string
	// CanRun is true for reviewers and admins; Editable, for an admin in dev mode, who may save
	// the edit back to the file (the others copy it).
	CanRun   bool
	Editable bool
	Dev      bool
	// LoadError is the file's error when it does not load as it is.
	LoadError string
	Runs      []PromptRun
}

// PromptRun is one of a prompt's last runs (a trace of it), to compare an edit's with.
type PromptRun struct {
	TraceID   string
	TraceURL  string
	RunURL    string
	Status    string
	Edited    bool
	Model     string
	Tokens    string
	Latency   string
	Output    string
	StartedAt time.Time
	Ago       string
}
