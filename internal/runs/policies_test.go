package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// PolicyAgentInput makes policyAgent's model call one tool with args.
type PolicyAgentInput struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

// TransferIn is the transfer tool's input.
type TransferIn struct {
	Amount float64 `json:"amount"`
	To     string  `json:"to"`
}

// MailIn is the sendEmail and notify tools' input.
type MailIn struct {
	To string `json:"to"`
}

// definePolicyAgent registers /flow/policyAgent, whose model calls the input's tool once (ref p1)
// and then answers "done: p1=<the tool's output>". transfer asks a person in its code; sendEmail
// asks for approval by its definition (RequireApproval's metadata); notify never asks. Each real
// execution of a tool is an effect.
func definePolicyAgent(r *engine.Registry, effect func(tc *engine.ToolContext) error) {
	transfer := engine.DefineTool(r, "transfer", "Moves money; asks a person first.",
		func(tc *engine.ToolContext, in TransferIn) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": fmt.Sprintf("Send %v to %s?", in.Amount, in.To)}})
			}
			if err := effect(tc); err != nil {
				return "", err
			}
			return fmt.Sprintf("sent %v to %s", in.Amount, in.To), nil
		})
	mail := engine.DefineTool(r, "sendEmail", "Sends an e-mail.",
		func(tc *engine.ToolContext, in MailIn) (string, error) {
			if err := effect(tc); err != nil {
				return "", err
			}
			return "mailed " + in.To, nil
		}, engine.WithToolMetadata(map[string]any{engine.MetaRequireApproval: true}))
	notify := engine.DefineTool(r, "notify", "Notifies someone.",
		func(tc *engine.ToolContext, in MailIn) (string, error) {
			if err := effect(tc); err != nil {
				return "", err
			}
			return "notified " + in.To, nil
		})
	scripted.DefineFunc(r, "test/policy", func(req *engine.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			var in PolicyAgentInput
			if err := json.Unmarshal([]byte(req.Messages[0].Text()), &in); err != nil {
				return scripted.Turn{}, err
			}
			return scripted.Reply(scripted.ToolCall(in.Tool, "p1", in.Args)), nil
		}
		var out []byte
		for _, m := range req.Messages {
			for _, p := range m.Content {
				if p.ToolResponse != nil {
					o, _ := json.Marshal(p.ToolResponse.Output)
					out = fmt.Appendf(out, "%s=%s", p.ToolResponse.Ref, o)
				}
			}
		}
		return scripted.Text("done: " + string(out)), nil
	})
	engine.DefineFlow(r, "policyAgent", func(ctx context.Context, in PolicyAgentInput) (string, error) {
		prompt, _ := json.Marshal(in)
		resp, err := engine.Generate(ctx, r, engine.WithModelName("test/policy"), engine.WithPrompt(string(prompt)),
			engine.WithTools(transfer, mail, notify))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

func (b *bundle) startPolicyAgent(t *testing.T, tool string, args map[string]any) *store.Run {
	t.Helper()
	in, err := json.Marshal(PolicyAgentInput{Tool: tool, Args: args})
	require.NoError(t, err)
	run, err := b.svc.StartRun(context.Background(), runs.StartParams{Action: "policyAgent", Input: in, CreatedBy: "tester"})
	require.NoError(t, err)
	return run
}

func (b *bundle) savePolicy(t *testing.T, src string) *store.Policy {
	t.Helper()
	p, created, err := b.store.PolicySave(context.Background(), store.PolicySaveParams{Source: src, Origin: "test", CreatedBy: "admin"})
	require.NoError(t, err)
	require.True(t, created)
	return p
}

const transferPolicy = `
rules:
  - name: small-transfers
    action: /flow/policyAgent
    tool: transfer
    when: input.amount < 100
    decide: approve
    reason: small amounts need no review
  - name: sanctioned
    tool: transfer
    when: input.to == "mallory"
    decide: deny
    reason: mallory is a sanctioned payee
  - name: big-transfers
    tool: transfer
    when: input.amount >= 10000
    decide: ask
    reason: a large amount
`

func TestAPolicyDecidesTheInterruptsItHasARuleFor(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.savePolicy(t, "rules: []")
	v := b.savePolicy(t, transferPolicy)
	ctx := context.Background()

	// approve: the run goes on at once, the tool runs once, the decision is signed by the rule.
	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 40, "to": "bob"})
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), "sent 40 to bob")
	require.Equal(t, map[string]int{"p1": 1}, b.effects(t, run.ID))
	list, err := b.store.InterruptListByRun(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	it := list[0]
	require.Equal(t, store.InterruptApproved, it.Status)
	require.Equal(t, fmt.Sprintf("policy small-transfers v%d", v.Version), *it.ResolvedBy)
	require.Equal(t, "small amounts need no review", *it.Comment)
	require.JSONEq(t, fmt.Sprintf(`{"rule":"small-transfers","version":%d,"decision":"approve","reason":"small amounts need no review"}`, v.Version), string(it.Policy))
	audit, err := b.store.AuditList(ctx, "interrupt", it.ID.String())
	require.NoError(t, err)
	require.Len(t, audit, 1)
	require.Equal(t, runs.PolicyActor, audit[0].Actor)
	require.Equal(t, "interrupt.approve", audit[0].Action)
	require.Contains(t, string(audit[0].Details), `"rule": "small-transfers"`)

	// deny: the model reads the denial with the rule's reason; the tool never runs.
	run = b.startPolicyAgent(t, "transfer", map[string]any{"amount": 4000, "to": "mallory"})
	done = b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), "mallory is a sanctioned payee")
	require.Contains(t, string(done.Output), `\"denied\":true`)
	require.Empty(t, b.effects(t, run.ID))

	// ask, by a rule or by no rule: a person decides; the routing rule is recorded.
	for _, tc := range []struct {
		amount float64
		policy string
	}{{20000, `"rule": "big-transfers"`}, {500, ""}} {
		run = b.startPolicyAgent(t, "transfer", map[string]any{"amount": tc.amount, "to": "bob"})
		b.wait(t, run.ID, store.RunInterrupted)
		pending := b.pending(t, run.ID)
		require.Len(t, pending, 1)
		if tc.policy == "" {
			require.Empty(t, pending[0].Policy)
		} else {
			require.Contains(t, string(pending[0].Policy), tc.policy)
		}
		require.Empty(t, b.effects(t, run.ID))
		b.resolve(t, pending[0], runs.ActionApprove, "")
		b.wait(t, run.ID, store.RunSucceeded)
		require.Equal(t, map[string]int{"p1": 1}, b.effects(t, run.ID))
	}
}

func TestAToolThatRequiresApprovalAsksBeforeItRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	for _, tc := range []struct {
		action, payload, output string
		effects                 map[string]int
	}{
		{runs.ActionApprove, "", "mailed ann@corp.example", map[string]int{"p1": 1}},
		{runs.ActionEdit, `{"to":"bea@corp.example"}`, "mailed bea@corp.example", map[string]int{"p1": 1}},
		{runs.ActionDeny, "", `\"denied\":true`, map[string]int{}},
	} {
		run := b.startPolicyAgent(t, "sendEmail", map[string]any{"to": "ann@corp.example"})
		b.wait(t, run.ID, store.RunInterrupted)
		require.Empty(t, b.effects(t, run.ID), "%s: the tool did not run before its approval", tc.action)
		pending := b.pending(t, run.ID)
		require.Len(t, pending, 1)
		require.Equal(t, "sendEmail", pending[0].Tool)
		require.JSONEq(t, `{"approval":"required","message":"sendEmail asks for approval before it runs"}`, string(pending[0].Metadata))
		b.resolve(t, pending[0], tc.action, tc.payload)
		done := b.wait(t, run.ID, store.RunSucceeded)
		require.Contains(t, string(done.Output), tc.output, tc.action)
		require.Equal(t, tc.effects, b.effects(t, run.ID), tc.action)
	}
}

func TestAGateRuleMakesAnyToolAskAndAPolicyCanDecideIt(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.savePolicy(t, `
rules:
  - name: outside-notices
    gate: tool == "notify" && !input.to.endsWith("@corp.example")
    reason: a notice leaves the company
  - name: partners
    tool: notify
    when: input.to.endsWith("@partner.example")
    decide: approve
`)
	// Inside the company: not gated.
	run := b.startPolicyAgent(t, "notify", map[string]any{"to": "ops@corp.example"})
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, map[string]int{"p1": 1}, b.effects(t, run.ID))

	// Outside: gated, a person decides.
	run = b.startPolicyAgent(t, "notify", map[string]any{"to": "eve@elsewhere.example"})
	b.wait(t, run.ID, store.RunInterrupted)
	require.Empty(t, b.effects(t, run.ID))
	pending := b.pending(t, run.ID)
	require.Len(t, pending, 1)
	var md map[string]any
	require.NoError(t, json.Unmarshal(pending[0].Metadata, &md))
	require.Equal(t, "a notice leaves the company", md["message"])
	require.Equal(t, "outside-notices", md["policy"].(map[string]any)["rule"])
	b.resolve(t, pending[0], runs.ActionDeny, "")
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), `\"denied\":true`)
	require.Empty(t, b.effects(t, run.ID))

	// A partner: gated, then approved by the decision rule, without a person.
	run = b.startPolicyAgent(t, "notify", map[string]any{"to": "pat@partner.example"})
	done = b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), "notified pat@partner.example")
	require.Equal(t, map[string]int{"p1": 1}, b.effects(t, run.ID))
	list, err := b.store.InterruptListByRun(context.Background(), run.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Contains(t, *list[0].ResolvedBy, "policy partners v")
}

func TestARuleRequiringTwoApproversKeepsTheInterruptUntilTwoDistinctApprove(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.savePolicy(t, `
rules:
  - name: four-eyes
    tool: transfer
    when: input.amount >= 1000
    decide: require
    approvals: 2
    reason: large amounts need two people
`)
	ctx := context.Background()
	approve := func(it *store.Interrupt, who string) (*store.Interrupt, error) {
		return b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: who, Version: it.Version})
	}

	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5000, "to": "bob"})
	b.wait(t, run.ID, store.RunInterrupted)
	it := b.pending(t, run.ID)[0]
	require.Contains(t, string(it.Policy), `"approvals": 2`)
	got, err := approve(it, "ann")
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, got.Status, "one approval of two")
	_, err = approve(got, "ann")
	var ce *runs.ConflictError
	require.ErrorAs(t, err, &ce, "the same reviewer twice counts once")
	require.Contains(t, ce.Error(), "ann approved interrupt")
	_, err = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionEdit, Actor: "cid", Input: json.RawMessage(`{"amount":1,"to":"bob"}`)})
	var ve *runs.ValidationError
	require.ErrorAs(t, err, &ve, "an edit cannot stand in for the approvals")
	require.Empty(t, b.effects(t, run.ID))
	// The first reviewer's form is stale by a version: the second approval is still taken.
	got, err = approve(it, "bea")
	require.NoError(t, err)
	require.Equal(t, store.InterruptApproved, got.Status)
	require.Equal(t, "ann, bea", *got.ResolvedBy)
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, map[string]int{"p1": 1}, b.effects(t, run.ID))

	// One denial denies.
	run = b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5000, "to": "cy"})
	b.wait(t, run.ID, store.RunInterrupted)
	it = b.pending(t, run.ID)[0]
	_, err = approve(it, "ann")
	require.NoError(t, err)
	_, err = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionDeny, Actor: "bea", Comment: "no"})
	require.NoError(t, err)
	b.wait(t, run.ID, store.RunSucceeded)
	require.Empty(t, b.effects(t, run.ID))

	// 50 racing reviewers: exactly two approvals count, the tool runs once.
	run = b.startPolicyAgent(t, "transfer", map[string]any{"amount": 9000, "to": "dan"})
	b.wait(t, run.ID, store.RunInterrupted)
	it = b.pending(t, run.ID)[0]
	const n = 50
	errs := make([]error, n)
	outs := make([]*store.Interrupt, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			outs[i], errs[i] = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: fmt.Sprintf("r%02d", i)})
		})
	}
	close(start)
	wg.Wait()
	partial, final := 0, 0
	for i, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, runs.ErrConflict)
			continue
		}
		if outs[i].Status == store.InterruptPending {
			partial++
		} else {
			final++
		}
	}
	require.Equal(t, 1, partial, "one approval recorded before the last")
	require.Equal(t, 1, final, "exactly one approval completes it")
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, map[string]int{"p1": 1}, b.effects(t, run.ID))
	approvals, err := b.store.InterruptApprovals(ctx, it.ID)
	require.NoError(t, err)
	require.Len(t, approvals, 2)
}

func TestAnInterruptNobodyDecidesInTimeIsDeniedOnceEvenRacingAReviewer(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	v := b.savePolicy(t, `
rules:
  - name: quick
    tool: transfer
    decide: ask
    expires: 1s
`)
	ctx := context.Background()
	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "bob"})
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), "nobody decided within 1s")
	require.Empty(t, b.effects(t, run.ID))
	list, err := b.store.InterruptListByRun(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, store.InterruptDenied, list[0].Status)
	require.Equal(t, fmt.Sprintf("policy quick v%d", v.Version), *list[0].ResolvedBy)

	// A reviewer approving as the deadline passes: one of them decides, once.
	const rounds = 100
	ids := make([]*store.Run, rounds)
	for i := range rounds {
		ids[i] = b.startPolicyAgent(t, "transfer", map[string]any{"amount": i, "to": "cy"})
	}
	var wg sync.WaitGroup
	for i, r := range ids {
		wg.Go(func() {
			// From just before the deadline to past the next sweep (a third of a second here).
			it := b.waitPending(t, r.ID)
			time.Sleep(time.Until(it.ExpiresAt.Add(time.Duration(i%20*25-50) * time.Millisecond)))
			_, _ = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita"})
		})
	}
	wg.Wait()
	approved := 0
	for _, r := range ids {
		done := b.wait(t, r.ID, store.RunSucceeded)
		list, err := b.store.InterruptListByRun(ctx, r.ID)
		require.NoError(t, err)
		require.Len(t, list, 1)
		audit, err := b.store.AuditList(ctx, "interrupt", list[0].ID.String())
		require.NoError(t, err)
		require.Len(t, audit, 1, "one decision: %+v", audit)
		switch list[0].Status {
		case store.InterruptApproved:
			approved++
			require.Equal(t, map[string]int{"p1": 1}, b.effects(t, r.ID))
		case store.InterruptDenied:
			require.Empty(t, b.effects(t, r.ID))
			require.Contains(t, string(done.Output), "nobody decided")
		default:
			t.Fatalf("interrupt %s is %s", list[0].ID, list[0].Status)
		}
	}
	t.Logf("%d of %d approved by the reviewer, the others denied by the deadline", approved, rounds)
}

// waitPending waits for the run's pending interrupt. Its bound is a liveness bound, not a timing:
// a test that starts a hundred runs at once on a machine at load 25 waited more than a minute
// for the last of them to reach its interrupt (#24's load protocol).
func (b *bundle) waitPending(t *testing.T, id uuid.UUID) *store.Interrupt {
	t.Helper()
	var it *store.Interrupt
	require.Eventually(t, func() bool {
		list, err := b.store.InterruptListByRun(context.Background(), id)
		require.NoError(t, err)
		if len(list) == 1 {
			it = list[0]
		}
		return it != nil
	}, 5*time.Minute, 20*time.Millisecond, "run %s never stopped at its interrupt", id)
	return it
}

// A rule may leave an interrupt to a role or a group: anyone else's decision is refused
// (ErrForbidden) and changes nothing, a member's (or an admin's) decides it; the CLI's operator, a
// trusted caller, may too. At the deadline a rule that escalates routes the interrupt to its
// escalation for another period, once and audited, instead of denying it; the next deadline denies.
func TestARuleRoutesToAGroupAndEscalatesAtItsDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	v := b.savePolicy(t, `
rules:
  - name: treasury
    tool: transfer
    when: input.amount >= 1000
    decide: require
    group: treasury
  - name: urgent
    tool: transfer
    when: input.to == "ops"
    decide: ask
    group: oncall
    expires: 1s
    escalate: admin
`)
	ctx := context.Background()
	bob := &policy.Decider{Role: "reviewer", Groups: []string{"sales"}}
	ann := &policy.Decider{Role: "reviewer", Groups: []string{"treasury"}}
	root := &policy.Decider{Role: "admin"}

	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5000, "to": "carol"})
	it := b.waitPending(t, run.ID)
	require.Contains(t, string(it.Policy), `"group": "treasury"`)
	_, err := b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "bob", Decider: bob})
	require.ErrorIs(t, err, runs.ErrForbidden)
	require.ErrorContains(t, err, "members of group treasury")
	require.Len(t, b.pending(t, run.ID), 1, "a refused decision changes nothing")
	_, err = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "ann", Decider: ann})
	require.NoError(t, err)
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, map[string]int{"p1": 1}, b.effects(t, run.ID))
	for _, d := range []*policy.Decider{root, nil} {
		run = b.startPolicyAgent(t, "transfer", map[string]any{"amount": 2000, "to": "dan"})
		it = b.waitPending(t, run.ID)
		_, err = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionDeny, Actor: "root", Decider: d, Comment: "no"})
		require.NoError(t, err, "an admin, or a trusted caller, may decide")
	}

	// Escalation: the on-call group had a second; then only admins may decide, for another.
	run = b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "ops"})
	it = b.waitPending(t, run.ID)
	first := *it.ExpiresAt
	require.Eventually(t, func() bool {
		it, err = b.store.InterruptGet(ctx, it.ID, false)
		require.NoError(t, err)
		return strings.Contains(string(it.Policy), `"escalated": true`)
	}, 30*time.Second, 20*time.Millisecond, "the interrupt was never escalated")
	require.Equal(t, store.InterruptPending, it.Status, "escalated, not denied")
	require.True(t, it.ExpiresAt.After(first), "a new deadline")
	require.Contains(t, string(it.Policy), `"role": "admin"`)
	require.Contains(t, string(it.Policy), `"escalated_from": "group:oncall"`)
	oncall := &policy.Decider{Role: "reviewer", Groups: []string{"oncall"}}
	_, err = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "olga", Decider: oncall})
	require.ErrorIs(t, err, runs.ErrForbidden, "escalated to admins: the on-call group no longer decides")
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), "after it was escalated to admin")
	require.Empty(t, b.effects(t, run.ID))
	audit, err := b.store.AuditList(ctx, "interrupt", it.ID.String())
	require.NoError(t, err)
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action)
	}
	require.ElementsMatch(t, []string{"interrupt.escalate", "interrupt.deny"}, actions, "escalated once, then denied once")
	list, err := b.store.InterruptListByRun(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("policy urgent v%d", v.Version), *list[0].ResolvedBy)
}
