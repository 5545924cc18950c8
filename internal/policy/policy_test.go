package policy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/policy"
)

const sample = `
rules:
  - name: small-transfers
    action: /flow/transferMoney
    tool: transfer
    when: input.amount < 100
    decide: approve
    reason: small amounts need no review
  - name: no-sanctioned
    when: tool == "transfer" && input.to in ["mallory"]
    decide: deny
    reason: sanctioned payee
  - name: vip
    when: labels["tier"] == "vip"
    decide: ask
  - name: mail
    gate: tool == "sendEmail" && !input.to.endsWith("@corp.example")
    reason: e-mail leaves the company
`

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

func TestRulesDecideInOrder(t *testing.T) {
	set, err := policy.Parse([]byte(sample))
	require.NoError(t, err)
	set.Version = 3
	cases := []struct {
		name string
		c    policy.Case
		want policy.Decision
		rule string
	}{
		{"small transfer", policy.Case{Action: "/flow/transferMoney", Tool: "transfer", Input: jsonValue(t, `{"amount": 40, "to": "bob"}`)}, policy.Approve, "small-transfers"},
		{"large transfer", policy.Case{Action: "/flow/transferMoney", Tool: "transfer", Input: jsonValue(t, `{"amount": 4000, "to": "bob"}`)}, policy.Ask, ""},
		{"another flow's small transfer", policy.Case{Action: "/flow/other", Tool: "transfer", Input: jsonValue(t, `{"amount": 40, "to": "bob"}`)}, policy.Ask, ""},
		{"sanctioned payee", policy.Case{Action: "/flow/other", Tool: "transfer", Input: jsonValue(t, `{"amount": 4000, "to": "mallory"}`)}, policy.Deny, "no-sanctioned"},
		{"label", policy.Case{Tool: "x", Labels: map[string]string{"tier": "vip"}}, policy.Ask, "vip"},
	}
	for _, tc := range cases {
		out := set.Decide(tc.c)
		require.Equal(t, tc.want, out.Decision, tc.name)
		require.Equal(t, tc.rule, out.Rule, tc.name)
	}
	out := set.Decide(cases[0].c)
	require.Equal(t, "policy small-transfers v3", out.By())
	require.Equal(t, "small amounts need no review", out.Reason)
}

func TestAnExpressionThatFailsDoesNotMatch(t *testing.T) {
	set, err := policy.Parse([]byte("rules:\n  - name: r\n    when: input.amount < 100\n    decide: approve\n"))
	require.NoError(t, err)
	out := set.Decide(policy.Case{Tool: "t", Input: jsonValue(t, `{"to": "bob"}`)})
	require.Equal(t, policy.Ask, out.Decision, "a missing field leaves the case to a person")
	require.Len(t, out.Errors, 1)
	require.Contains(t, out.Errors[0], "r: ")
	out = set.Decide(policy.Case{Tool: "t"})
	require.Equal(t, policy.Ask, out.Decision, "no input at all")
}

func TestGates(t *testing.T) {
	set, err := policy.Parse([]byte(sample))
	require.NoError(t, err)
	require.True(t, set.HasGates())
	g, ok := set.Gate(policy.Case{Tool: "sendEmail", Input: jsonValue(t, `{"to": "x@gmail.example"}`)})
	require.True(t, ok)
	require.Equal(t, "mail", g.Rule)
	_, ok = set.Gate(policy.Case{Tool: "sendEmail", Input: jsonValue(t, `{"to": "x@corp.example"}`)})
	require.False(t, ok)
	require.Equal(t, policy.Ask, set.Decide(policy.Case{Tool: "sendEmail"}).Decision, "a gate rule decides nothing")
}

func TestBadPoliciesSayWhereAndWhy(t *testing.T) {
	cases := map[string]string{
		"rules:\n  - name: a\n    decide: maybe\n":                                   `line 2 rule "a": decide "maybe"`,
		"rules:\n  - decide: approve\n":                                              "line 2: a rule needs a name",
		"rules:\n  - name: a\n    wen: input.x\n    decide: approve\n":               `line 3: unknown key "wen"`,
		"rules:\n  - name: a\n    when: input.x <\n    decide: approve\n":            `line 2 rule "a": ERROR`,
		"rules:\n  - name: a\n    when: tool + 'x'\n    decide: approve\n":           "must be true or false",
		"rules:\n  - name: a\n    decide: approve\n  - name: a\n    decide: deny\n":  "taken by the rule of line 2",
		"rules:\n  - name: a\n    gate: 'true'\n    decide: deny\n":                  "a gate rule only gates",
		"rules:\n  - name: a\n    decide: require\n":                                 "needs a role, a group, or approvals from 2",
		"rules:\n  - name: a\n    decide: approve\n    approvals: 2\n":               "approvals go with decide: require",
		"rules:\n  - name: a\n    decide: ask\n    expires: soon\n":                  `expires "soon"`,
		"rules:\n  - name: a\n    decide: approve\n    expires: 1h\n":                "expires goes with decide: ask or require",
		"rules:\n  - name: a\n    decide: approve\n    role: admin\n":                "role, group and escalate go with decide: ask or require",
		"rules:\n  - name: a\n    decide: ask\n    role: boss\n":                     `role "boss": want reviewer or admin`,
		"rules:\n  - name: a\n    decide: ask\n    group: 'a b'\n":                   `group "a b"`,
		"rules:\n  - name: a\n    decide: ask\n    escalate: admin\n":                "escalate needs expires",
		"rules:\n  - name: a\n    decide: ask\n    expires: 1h\n    escalate: ceo\n": `escalate "ceo": want a role`,
		"rule:\n  - name: a\n": `unknown key "rule"`,
		"rules: [":             "policy: ",
	}
	for src, want := range cases {
		_, err := policy.Parse([]byte(src))
		require.Error(t, err, src)
		require.Contains(t, err.Error(), want, src)
		var pe *policy.Error
		require.ErrorAs(t, err, &pe)
	}
	set, err := policy.Parse(nil)
	require.NoError(t, err)
	require.Equal(t, policy.Ask, set.Decide(policy.Case{Tool: "x"}).Decision)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("rules: []"))
	f.Fuzz(func(t *testing.T, src []byte) {
		set, err := policy.Parse(src)
		if err != nil {
			return
		}
		set.Decide(policy.Case{Tool: "transfer", Input: map[string]any{"amount": 5.0}})
		set.Gate(policy.Case{Tool: "sendEmail"})
	})
}

func TestRulesRouteToARoleOrAGroupAndEscalate(t *testing.T) {
	set, err := policy.Parse([]byte(`rules:
  - name: treasury
    tool: transfer
    when: input.amount >= 10000
    decide: require
    group: treasury
    expires: 1h
    escalate: admin
  - name: admins-only
    tool: deleteAccount
    decide: ask
    role: admin
`))
	require.NoError(t, err)
	out := set.Decide(policy.Case{Tool: "transfer", Input: map[string]any{"amount": 20000.0}})
	require.Equal(t, policy.Require, out.Decision)
	require.Equal(t, 1, out.Approvals, "require with a group and no approvals: one of the group's")
	require.Equal(t, "treasury", out.Group)
	require.Equal(t, "admin", out.Escalate)
	require.Equal(t, time.Hour, out.Expires)
	out = set.Decide(policy.Case{Tool: "deleteAccount"})
	require.Equal(t, policy.Ask, out.Decision)
	require.Equal(t, "admin", out.Role)

	ann := policy.Decider{Role: "reviewer", Groups: []string{"treasury"}}
	bob := policy.Decider{Role: "reviewer"}
	root := policy.Decider{Role: "admin"}
	viewer := policy.Decider{Role: "viewer", Groups: []string{"treasury"}}
	require.True(t, ann.MayDecide("", "treasury"))
	require.False(t, bob.MayDecide("", "treasury"))
	require.True(t, root.MayDecide("", "treasury"), "an admin always may")
	require.False(t, ann.MayDecide("admin", ""))
	require.True(t, bob.MayDecide("", ""))
	require.False(t, viewer.MayDecide("", "treasury"), "a viewer never decides")
	role, group, err := policy.ParseRoute("group:leads")
	require.NoError(t, err)
	require.Equal(t, [2]string{"", "leads"}, [2]string{role, group})
}
