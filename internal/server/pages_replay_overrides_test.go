package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// replayFromMenu opens the run page's Replay menu in the browser, fills the form whose test id is
// given with fill, submits it, and returns the run the server redirected to: the new one, whose
// header says what it was derived from.
func replayFromMenu(t *testing.T, b *bundle, br *browsertest.Browser, orig uuid.UUID, form string, fill ...chromedp.Action) uuid.UUID {
	t.Helper()
	page := "/runs/" + orig.String()
	sel := `[data-testid="` + form + `"]`
	actions := []chromedp.Action{
		chromedp.Navigate(b.url + page),
		browsertest.Click(`[data-testid="replay-menu"] > summary`),
		chromedp.WaitVisible(sel+` button[type="submit"]`, chromedp.ByQuery),
	}
	actions = append(actions, fill...)
	var at string
	actions = append(actions,
		browsertest.Click(sel+` button[type="submit"]`),
		// The original has no lineage; the new run's header links back to it.
		chromedp.WaitVisible(`[data-testid="compare"][href^="`+page+`/diff/"]`, chromedp.ByQuery),
		chromedp.Location(&at),
	)
	require.NoError(t, br.Run(actions...))
	u, err := url.Parse(at)
	require.NoError(t, err)
	id := mustUUID(t, strings.TrimPrefix(u.Path, "/runs/"))
	require.NotEqual(t, orig, id)
	return id
}

// settle waits until a run stops moving (it finished, or waits for a reviewer) and returns it.
func (b *bundle) settle(t *testing.T, id uuid.UUID) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = b.store.RunGet(context.Background(), id)
		require.NoError(t, err)
		return store.RunFinished(run.Status) || run.Status == store.RunInterrupted
	}, 30*time.Second, 20*time.Millisecond, "run %s never settled", id)
	return run
}

// modelRequest is the part of a recorded model request that the tests read.
type modelRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"messages"`
	Config json.RawMessage `json:"config"`
}

// modelCalls returns a run's recorded model calls, their requests decoded.
func (b *bundle) modelCalls(t *testing.T, id uuid.UUID) ([]*store.ModelCall, []modelRequest) {
	t.Helper()
	calls, err := b.store.ModelCallList(context.Background(), id)
	require.NoError(t, err)
	require.NotEmpty(t, calls, "run %s called no model", id)
	reqs := make([]modelRequest, len(calls))
	for i, c := range calls {
		require.NoError(t, json.Unmarshal(c.Request, &reqs[i]), "model request of turn %d", c.Turn)
	}
	return calls, reqs
}

// text is a message's text parts, joined.
func (r modelRequest) text(i int) string {
	var sb strings.Builder
	for _, p := range r.Messages[i].Content {
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// TestBrowserReplayAppliesTheOriginalDecisions: an exact replay asked from the Replay menu to apply
// the original reviewers' decisions does not wait for a reviewer again. Its booking interrupt is
// resolved with the original's decision (status, reviewer, comment), nothing for it waits in the
// inbox, and the replay runs to the end with the original's answer.
func TestBrowserReplayAppliesTheOriginalDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	it := b.travel(t, "Lisbon")
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionDeny, Actor: "rita", Comment: "over the travel budget"})
	require.NoError(t, err)
	b.waitStatus(t, it.RunID, store.RunSucceeded)
	orig, err := b.store.RunGet(ctx, it.RunID)
	require.NoError(t, err)
	br := browsertest.New(t)

	id := replayFromMenu(t, b, br, orig.ID, "replay-exact",
		browsertest.Click(`[data-testid="replay-exact"] input[name="apply_resolutions"]`))
	replay := b.settle(t, id)
	require.Equal(t, store.RunSucceeded, replay.Status, "the decision was applied, so the replay did not wait for a reviewer")
	require.JSONEq(t, string(orig.Output), string(replay.Output))

	list, err := b.store.InterruptListByRun(ctx, id)
	require.NoError(t, err)
	require.Len(t, list, 1)
	got := list[0]
	require.Equal(t, "bookFlight", got.Tool)
	require.Equal(t, store.InterruptDenied, got.Status)
	require.Equal(t, "rita", *got.ResolvedBy)
	require.Equal(t, "over the travel budget", *got.Comment)
	resp, body := get(t, b.url+"/api/v1/interrupts?status=pending", "Accept", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, body, id.String(), "nothing of the replay waits in the inbox")
	require.Empty(t, br.Problems())
}

// TestBrowserReplayForkWithAnEditedMessage: a fork from the Replay menu with the prompt edited at
// the fork point holds the edited message in its copied history, and the model of the turn it
// goes on from is sent that message: the research goes on about the new topic.
func TestBrowserReplayForkWithAnEditedMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	orig := b.startRun(t, "/flow/researchAgent", `{"topic":"menus","depth":2}`, store.RunSucceeded)
	msgs, err := b.store.MessageList(ctx, orig.ID)
	require.NoError(t, err)
	require.Equal(t, "user", msgs[1].Role)
	require.Contains(t, string(msgs[1].Content), `Research \"menus\" in 2 rounds.`)
	br := browsertest.New(t)

	edited := `{"role":"user","content":[{"text":"Research \"edited prompts\" in 2 rounds."}]}`
	id := replayFromMenu(t, b, br, orig.ID, "replay-fork",
		chromedp.SetValue(`[data-testid="replay-fork"] select[name="turn"]`, "1", chromedp.ByQuery),
		chromedp.SendKeys(`[data-testid="replay-fork"] input[name="edit_seq"]`, "1", chromedp.ByQuery),
		chromedp.SendKeys(`[data-testid="replay-fork"] textarea[name="edit_message"]`, edited, chromedp.ByQuery),
		browsertest.Click(`[data-testid="replay-fork"] input[name="confirm"]`),
	)
	fork := b.settle(t, id)
	require.Equal(t, store.RunSucceeded, fork.Status)

	forked, err := b.store.MessageList(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "user", forked[1].Role)
	require.Contains(t, string(forked[1].Content), `Research \"edited prompts\" in 2 rounds.`, "the fork's history holds the edited message")
	calls, reqs := b.modelCalls(t, id)
	require.Len(t, calls, 3, "turn 0 copied, turns 1 and 2 called")
	require.Equal(t, 1, calls[1].Turn)
	require.Equal(t, `Research "edited prompts" in 2 rounds.`, reqs[1].text(1), "the model of the turn forked from was sent the edited message")
	require.Equal(t, `Research "edited prompts" in 2 rounds.`, reqs[2].text(1))
	require.Contains(t, string(fork.Output), "edited prompts")
	require.NotContains(t, string(fork.Output), "menus")
	require.Empty(t, br.Problems())
}

// TestBrowserReplayRerunWithAnotherModel: a re-run from the Replay menu with another of the
// registered models calls that model, not the run's own, and records it by name as the run's own
// is. The demo's travel model asks a researcher's question for the weather, a tool the research
// agent does not have, so the re-run fails there: proof that the other model answered.
func TestBrowserReplayRerunWithAnotherModel(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	orig := b.startRun(t, "/flow/researchAgent", `{"topic":"models","depth":1}`, store.RunSucceeded)
	require.Equal(t, "demo/research", *orig.Model)
	br := browsertest.New(t)

	id := replayFromMenu(t, b, br, orig.ID, "replay-rerun",
		chromedp.SetValue(`[data-testid="replay-rerun"] select[name="model"]`, "/model/demo/travel", chromedp.ByQuery),
		browsertest.Click(`[data-testid="replay-rerun"] input[name="confirm"]`),
	)
	rerun := b.settle(t, id)
	require.Equal(t, "demo/travel", *rerun.Model)
	calls, _ := b.modelCalls(t, id)
	require.Len(t, calls, 1)
	require.Equal(t, "demo/travel", calls[0].Model)
	require.Contains(t, string(calls[0].Response), `"getWeather"`, "the travel model answered")
	require.Equal(t, store.RunFailed, rerun.Status)
	require.Contains(t, string(rerun.Error), `tool \"getWeather\" (ref weather-1) not found`)
	require.Empty(t, br.Problems())
}

// TestBrowserReplayRerunWithSystemAndConfig: a re-run from the Replay menu with a system
// instruction and a model config sends the model that system message in place of the flow's own,
// and that config, on every call.
func TestBrowserReplayRerunWithSystemAndConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	orig := b.startRun(t, "/flow/researchAgent", `{"topic":"settings","depth":1}`, store.RunSucceeded)
	_, reqs := b.modelCalls(t, orig.ID)
	require.Equal(t, "You are a researcher. Search in rounds, then write a summary.", reqs[0].text(0))
	br := browsertest.New(t)

	id := replayFromMenu(t, b, br, orig.ID, "replay-rerun",
		chromedp.SendKeys(`[data-testid="replay-rerun"] textarea[name="system"]`, "You are a terse researcher who cites every source.", chromedp.ByQuery),
		chromedp.SendKeys(`[data-testid="replay-rerun"] input[name="config"]`, `{"temperature":0.2}`, chromedp.ByQuery),
		browsertest.Click(`[data-testid="replay-rerun"] input[name="confirm"]`),
	)
	rerun := b.settle(t, id)
	require.Equal(t, store.RunSucceeded, rerun.Status)
	calls, reqs := b.modelCalls(t, id)
	require.Len(t, calls, 2)
	for i, r := range reqs {
		require.Equal(t, "system", r.Messages[0].Role, "turn %d", calls[i].Turn)
		require.Equal(t, "You are a terse researcher who cites every source.", r.text(0), "turn %d", calls[i].Turn)
		require.JSONEq(t, `{"temperature":0.2}`, string(r.Config), "turn %d", calls[i].Turn)
	}
	require.Empty(t, br.Problems())
}
