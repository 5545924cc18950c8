// Package policy decides interrupts by rules instead of people: a policy is an ordered list of
// rules, each matching on the run's action, the tool and a CEL expression, and deciding approve,
// deny or ask (leave it to a person). Gate rules make a tool ask before it runs at all.
//
// A policy is YAML:
//
//	rules:
//	  - name: small-transfers
//	    action: /flow/transferMoney      # optional
//	    tool: transfer                   # optional
//	    when: input.amount < 100         # CEL, optional
//	    decide: approve                  # approve | deny | ask | require (approvals: N)
//	    reason: small amounts need no review
//	  - name: mail-is-gated
//	    gate: tool == "sendEmail"        # CEL: interrupt before the tool runs
//	    reason: e-mail leaves the company
//
// The CEL expressions see tool (string), action (string), input (the tool's input), run_input (the
// run's input), metadata (the interrupt's metadata) and labels (the run's labels, a
// map(string, string)); they must be boolean. The first decision rule that matches decides; an
// expression that fails to evaluate (a missing field, say) does not match, so a broken rule leaves
// the interrupt to a person rather than deciding it.
//
// Decisions are applied by the run service (internal/runs) in the transaction that stores the
// interrupts; this package only parses, compiles and evaluates.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"go.yaml.in/yaml/v3"
)

// Decision is what a rule decides about an interrupt.
type Decision string

// The decisions.
const (
	Approve Decision = "approve"
	Deny    Decision = "deny"
	// Ask leaves the interrupt to a person: what happens when no rule matches.
	Ask Decision = "ask"
	// Require leaves it to people: Approvals distinct reviewers must approve it (one denial
	// denies it).
	Require Decision = "require"
)

// MaxApprovals caps a rule's approvals.
const MaxApprovals = 10

// MaxSourceBytes caps a policy's source.
const MaxSourceBytes = 1 << 20

// Rule is one rule of a policy, as written.
type Rule struct {
	Name   string   `yaml:"name" json:"name"`
	Action string   `yaml:"action,omitempty" json:"action,omitempty"`
	Tool   string   `yaml:"tool,omitempty" json:"tool,omitempty"`
	When   string   `yaml:"when,omitempty" json:"when,omitempty"`
	Gate   string   `yaml:"gate,omitempty" json:"gate,omitempty"`
	Decide Decision `yaml:"decide,omitempty" json:"decide,omitempty"`
	Reason string   `yaml:"reason,omitempty" json:"reason,omitempty"`
	// Approvals is how many distinct reviewers must approve, for decide: require.
	Approvals int `yaml:"approvals,omitempty" json:"approvals,omitempty"`
	// Expires, for decide: ask or require, is how long people have (a Go duration, "30m"): then
	// the interrupt is denied, failing safe, or escalated (Escalate).
	Expires string `yaml:"expires,omitempty" json:"expires,omitempty"`
	// Role and Group, for decide: ask or require, say who may decide: reviewers of at least that
	// role (reviewer or admin), members of that group (admins always may).
	Role  string `yaml:"role,omitempty" json:"role,omitempty"`
	Group string `yaml:"group,omitempty" json:"group,omitempty"`
	// Escalate, with Expires, routes the interrupt at its deadline to a role or a group
	// ("admin", "group:treasury-leads") for another Expires instead of denying it; nobody's
	// decision by the second deadline denies it.
	Escalate string `yaml:"escalate,omitempty" json:"escalate,omitempty"`

	expires time.Duration

	line int
	prog cel.Program // When's, or Gate's
}

// Set is a compiled policy.
type Set struct {
	// Version is the stored version the set was compiled from (0 for a draft).
	Version int64
	Rules   []*Rule
}

// Case is what the rules look at.
type Case struct {
	Action   string
	Tool     string
	Input    any
	RunInput any
	Metadata any
	Labels   map[string]string
}

// Outcome is a decision and the rule that made it.
type Outcome struct {
	Decision Decision `json:"decision"`
	// Rule names the rule; empty when none matched (Decision is then Ask).
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Version int64  `json:"version,omitempty"`
	// Approvals is how many distinct reviewers must approve, when Decision is Require.
	Approvals int `json:"approvals,omitempty"`
	// Expires is how long people have to decide, when Decision is Ask or Require (0: no limit).
	Expires time.Duration `json:"expires,omitempty"`
	// Role, Group and Escalate are the rule's (see Rule), when Decision is Ask or Require.
	Role     string `json:"role,omitempty"`
	Group    string `json:"group,omitempty"`
	Escalate string `json:"escalate,omitempty"`
	// Errors are the rules whose expression failed on this case, with why: they did not match.
	Errors []string `json:"errors,omitempty"`
}

// By is how a decision is signed in the interrupt's history: "policy small-transfers v3".
func (o Outcome) By() string {
	if o.Version == 0 {
		return "policy " + o.Rule + " (draft)"
	}
	return fmt.Sprintf("policy %s v%d", o.Rule, o.Version)
}

// Error is a policy that does not parse or compile; Line is its 1-based line when known.
type Error struct {
	Line int
	Rule string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("policy")
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Rule != "" {
		fmt.Fprintf(&b, " rule %q", e.Rule)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

var env = mustEnv()

func mustEnv() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("action", cel.StringType),
		cel.Variable("input", cel.DynType),
		cel.Variable("run_input", cel.DynType),
		cel.Variable("metadata", cel.DynType),
		cel.Variable("labels", cel.MapType(cel.StringType, cel.StringType)),
		// JSON numbers are doubles: input.amount < 100 must compare them with an int literal.
		cel.CrossTypeNumericComparisons(true),
	)
	if err != nil {
		panic(err)
	}
	return e
}

// Parse reads and compiles a policy. An empty source is the empty policy: every interrupt is asked.
func Parse(src []byte) (*Set, error) {
	if len(src) > MaxSourceBytes {
		return nil, &Error{Msg: fmt.Sprintf("is %d bytes; at most %d", len(src), MaxSourceBytes)}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) { // an empty document
			return &Set{}, nil
		}
		return nil, &Error{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var file struct {
		Rules []yaml.Node `yaml:"rules"`
	}
	if err := doc.Decode(&file); err != nil {
		return nil, &Error{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if err := knownKeys(&doc, "rules"); err != nil {
		return nil, err
	}
	set := &Set{}
	names := map[string]int{}
	for i := range file.Rules {
		n := &file.Rules[i]
		r := &Rule{line: n.Line}
		if err := knownKeys(n, "name", "action", "tool", "when", "gate", "decide", "reason", "approvals", "expires", "role", "group", "escalate"); err != nil {
			return nil, err
		}
		if err := n.Decode(r); err != nil {
			return nil, &Error{Line: n.Line, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		}
		if err := r.compile(); err != nil {
			return nil, err
		}
		if prev, dup := names[r.Name]; dup {
			return nil, &Error{Line: n.Line, Rule: r.Name, Msg: fmt.Sprintf("the name is taken by the rule of line %d", prev)}
		}
		names[r.Name] = n.Line
		set.Rules = append(set.Rules, r)
	}
	return set, nil
}

// knownKeys refuses a mapping key that is not one of keys: a misspelt "wen:" would otherwise make
// a rule that matches everything.
func knownKeys(n *yaml.Node, keys ...string) error {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return &Error{Line: n.Line, Msg: "want a mapping"}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ok := false
		for _, want := range keys {
			ok = ok || k.Value == want
		}
		if !ok {
			return &Error{Line: k.Line, Msg: fmt.Sprintf("unknown key %q (want one of %s)", k.Value, strings.Join(keys, ", "))}
		}
	}
	return nil
}

func (r *Rule) compile() error {
	fail := func(format string, args ...any) error {
		return &Error{Line: r.line, Rule: r.Name, Msg: fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(r.Name) == "" {
		return fail("a rule needs a name: decisions are signed with it")
	}
	switch {
	case r.Gate != "" && (r.Decide != "" || r.When != "" || r.Approvals != 0 || r.Expires != "" || r.Role != "" || r.Group != "" || r.Escalate != ""):
		return fail("a gate rule only gates (gate, action, tool, reason); decide and when belong to decision rules")
	case r.Gate == "":
		switch r.Decide {
		case Approve, Deny, Ask:
			if r.Approvals != 0 {
				return fail("approvals go with decide: require")
			}
		case Require:
			if r.Approvals == 0 && (r.Role != "" || r.Group != "") {
				r.Approvals = 1 // require: a role or a group, one approval of theirs
			}
			if r.Approvals < 1 || r.Approvals > MaxApprovals || r.Approvals == 1 && r.Role == "" && r.Group == "" {
				return fail("decide: require needs a role, a group, or approvals from 2 to %d (one approval by anyone is decide: ask)", MaxApprovals)
			}
		case "":
			return fail("decide is missing: approve, deny, ask or require (or write a gate rule)")
		default:
			return fail("decide %q: want approve, deny, ask or require", r.Decide)
		}
	}
	if r.Expires != "" {
		d, err := time.ParseDuration(r.Expires)
		switch {
		case err != nil || d <= 0:
			return fail("expires %q: want a duration such as 30m or 24h", r.Expires)
		case r.Decide != Ask && r.Decide != Require:
			return fail("expires goes with decide: ask or require (the deadline of a person's decision)")
		}
		r.expires = d
	}
	if r.Role != "" || r.Group != "" || r.Escalate != "" {
		if r.Decide != Ask && r.Decide != Require {
			return fail("role, group and escalate go with decide: ask or require (who may decide, and who next)")
		}
	}
	if r.Role != "" && r.Role != RoleReviewer && r.Role != RoleAdmin {
		return fail("role %q: want reviewer or admin", r.Role)
	}
	if r.Group != "" && !GroupName.MatchString(r.Group) {
		return fail("group %q: a group's name is 1 to 64 letters, digits, '.', '_' or '-'", r.Group)
	}
	if r.Escalate != "" {
		if r.Expires == "" {
			return fail("escalate needs expires: the deadline at which the interrupt escalates")
		}
		if _, _, err := ParseRoute(r.Escalate); err != nil {
			return fail("escalate %q: %v", r.Escalate, err)
		}
	}
	expr := r.When
	if r.Gate != "" {
		expr = r.Gate
	}
	if strings.TrimSpace(expr) == "" {
		return nil
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return fail("%s", strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return fail("the expression %q is a %s; it must be true or false", expr, ast.OutputType())
	}
	prog, err := env.Program(ast, cel.CostLimit(100_000))
	if err != nil {
		return fail("%v", err)
	}
	r.prog = prog
	return nil
}

// matches reports whether the rule applies to c: its action and tool, if given, are c's, and its
// expression, if any, is true.
func (r *Rule) matches(c Case) (bool, error) {
	if r.Action != "" && r.Action != c.Action && "/flow/"+r.Action != c.Action {
		return false, nil
	}
	if r.Tool != "" && r.Tool != c.Tool {
		return false, nil
	}
	if r.prog == nil {
		return true, nil
	}
	labels := c.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	out, _, err := r.prog.Eval(map[string]any{
		"tool": c.Tool, "action": c.Action, "input": orNull(c.Input), "run_input": orNull(c.RunInput),
		"metadata": orNull(c.Metadata), "labels": labels,
	})
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %v, not true or false", out)
	}
	return bool(b), nil
}

func orNull(v any) any {
	if v == nil {
		return types.NullValue
	}
	return v
}

// Decide applies the decision rules in order: the first that matches decides. None: Ask.
func (s *Set) Decide(c Case) Outcome {
	out := Outcome{Decision: Ask}
	if s == nil {
		return out
	}
	for _, r := range s.Rules {
		if r.Gate != "" {
			continue
		}
		ok, err := r.matches(c)
		if err != nil {
			out.Errors = append(out.Errors, r.Name+": "+err.Error())
			continue
		}
		if ok {
			out.Decision, out.Rule, out.Reason, out.Version, out.Approvals, out.Expires = r.Decide, r.Name, r.Reason, s.Version, r.Approvals, r.expires
			out.Role, out.Group, out.Escalate = r.Role, r.Group, r.Escalate
			return out
		}
	}
	return out
}

// Gate reports the first gate rule that matches c: the tool must ask before it runs.
func (s *Set) Gate(c Case) (Outcome, bool) {
	if s == nil {
		return Outcome{}, false
	}
	for _, r := range s.Rules {
		if r.Gate == "" {
			continue
		}
		if ok, err := r.matches(c); err == nil && ok {
			return Outcome{Decision: Ask, Rule: r.Name, Reason: r.Reason, Version: s.Version}, true
		}
	}
	return Outcome{}, false
}

// The roles a rule may require (internal/store's names).
const (
	RoleReviewer = "reviewer"
	RoleAdmin    = "admin"
)

// GroupName is what a group's name may be.
var GroupName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ParseRoute reads an escalation's target: a role (reviewer, admin) or "group:NAME".
func ParseRoute(s string) (role, group string, err error) {
	if g, ok := strings.CutPrefix(s, "group:"); ok {
		if !GroupName.MatchString(g) {
			return "", "", fmt.Errorf("a group's name is 1 to 64 letters, digits, '.', '_' or '-'")
		}
		return "", g, nil
	}
	if s == RoleReviewer || s == RoleAdmin {
		return s, "", nil
	}
	return "", "", fmt.Errorf("want a role (reviewer, admin) or group:NAME")
}

// Decider is who would decide an interrupt: a reviewer's role and groups.
type Decider struct {
	Role   string
	Groups []string
}

// MayDecide reports whether d may decide an interrupt routed to role and group (either empty:
// no such condition): d's role is at least role, and d is a member of group (an admin always may).
func (d Decider) MayDecide(role, group string) bool {
	rank := map[string]int{RoleReviewer: 1, RoleAdmin: 2}
	if d.Role == RoleAdmin {
		return true
	}
	if rank[d.Role] == 0 {
		return false
	}
	if role != "" && rank[d.Role] < rank[role] {
		return false
	}
	return group == "" || slices.Contains(d.Groups, group)
}

// HasGates reports whether any rule gates: without one, tool calls need no look at the policy.
func (s *Set) HasGates() bool {
	if s == nil {
		return false
	}
	for _, r := range s.Rules {
		if r.Gate != "" {
			return true
		}
	}
	return false
}
