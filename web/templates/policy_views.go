package templates

import "time"

// PolicyRuleRow is one rule of the policy in force.
type PolicyRuleRow struct {
	Name, Action, Tool, Decides, When, Reason string
}

// PolicyVersionRow is one stored version of the policy.
type PolicyVersionRow struct {
	Version   int64
	Origin    string
	CreatedBy string
	CreatedAt time.Time
	// InForce marks the version in force.
	InForce bool
}

// WhatIfRow is one past interrupt a draft policy would have decided otherwise.
type WhatIfRow struct {
	InterruptID, Tool, Rule, Policy, Status, ResolvedBy string
}

// WhatIfView is a draft policy's what-if over past interrupts.
type WhatIfView struct {
	Interrupts, Approve, Deny, Ask, AskByRule, Pending, Errors int
	Disagreements                                              []WhatIfRow
	// More counts the disagreements not listed.
	More int
}

// PolicyPage is the approval policy page's view model.
type PolicyPage struct {
	Page
	Version   int64
	Origin    string
	CreatedBy string
	CreatedAt time.Time
	Source    string
	Rules     []PolicyRuleRow
	Versions  []PolicyVersionRow
	// Selected is the stored version shown in the editor and the what-if (?version=N), 0 for
	// the one in force.
	Selected int64
	// File is the policy file the server loads; the page then edits nothing.
	File string
	// CanEdit: an admin, and no policy file.
	CanEdit bool
	// Draft is the what-if's source (the policy in force by default) and Last its size.
	Draft  string
	Last   int
	WhatIf *WhatIfView
	Flash  string
	// FlashError marks Flash as an error (a draft that does not compile, say).
	FlashError bool
}
