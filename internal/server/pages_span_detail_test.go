package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserSpanDetailReadsLikeAPage: the interrupted tool span of an approved run says
// "interrupted" and how its interrupt was resolved (approved by rita, when, with her comment, a
// link to it); its attributes are a key/value table with Genkit's keys before the GenAI ones,
// sortable by key; its input is a JSON tree whose nodes copy their value and their path; a span
// that ended well reads OK.
func TestBrowserSpanDetailReadsLikeAPage(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	run := b.startRun(t, "/flow/travelAgent", `{"destination":"Lisbon"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita", Comment: "fine by me"})
	require.NoError(t, err)
	b.waitStatus(t, run.ID, store.RunSucceeded)
	b.flushSpans(t, run.ID, 4)

	br := browsertest.New(t)
	var v struct {
		Status, Outcome, OutcomeLink string
		Groups                       []string
		Keys                         []string
		TreePaths                    []string
		RootStatus                   string
	}
	read := `(() => {
		const panel = document.querySelector("#span-detail .span-panel");
		return {
			Status: panel.querySelector('[data-testid="span-status"]').textContent,
			Outcome: (panel.querySelector('[data-testid="interrupt-outcome"]') || {}).textContent || "",
			OutcomeLink: (panel.querySelector('[data-testid="interrupt-outcome"] a') || {}).getAttribute?.("href") || "",
			Groups: [...panel.querySelectorAll('[data-testid="attr-table"] tbody tr')].map(r => r.dataset.group),
			Keys: [...panel.querySelectorAll('[data-testid="attr-table"] tbody tr')].map(r => r.dataset.key),
			TreePaths: [...panel.querySelectorAll('[data-testid="json-tree"] button.copy[title^="Copy the path"]')].map(b => b.dataset.copy),
			RootStatus: "",
		};
	})()`
	url := fmt.Sprintf("%s/runs/%s?tool=%s&turn=%d#trace", b.url, run.ID, it.Tool, it.Turn)
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(`#span-detail [data-testid="interrupt-outcome"]`, chromedp.ByQuery),
		chromedp.Evaluate(read, &v),
	))
	require.Equal(t, "interrupted", v.Status)
	require.Contains(t, v.Outcome, "approved")
	require.Contains(t, v.Outcome, "by rita")
	require.Contains(t, v.Outcome, "fine by me")
	require.Equal(t, "/runs/"+run.ID.String()+"#interrupt-"+it.ID.String(), v.OutcomeLink)
	require.NotEmpty(t, v.Keys)
	for i := 1; i < len(v.Groups); i++ {
		require.LessOrEqual(t, v.Groups[i-1], v.Groups[i], "Genkit's keys first, then GenAI's: %v", v.Keys)
	}
	require.True(t, strings.HasPrefix(v.Keys[0], "genkit:"), v.Keys)
	require.NotEmpty(t, v.TreePaths, "the input is a JSON tree")
	require.Contains(t, v.TreePaths, "$.destination", "a leaf's path is copyable: %v", v.TreePaths)

	var sortedKeys []string
	var copied string
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`#span-detail button[data-sort-attrs]`),
		chromedp.Evaluate(`[...document.querySelectorAll('#span-detail [data-testid="attr-table"] tbody tr')].map(r => r.dataset.key)`, &sortedKeys),
		browsertest.Click(`#span-detail [data-testid="json-tree"] button.copy`),
		wait(`document.querySelector('#span-detail [data-testid="json-tree"] button.copy').dataset.copied === "true"`),
		chromedp.Evaluate(`document.querySelector('#span-detail [data-testid="json-tree"] button.copy').dataset.copied`, &copied),
	))
	for i := 1; i < len(sortedKeys); i++ {
		require.LessOrEqual(t, sortedKeys[i-1], sortedKeys[i], "sorted by key")
	}
	require.Equal(t, "true", copied, "the copy button answered")

	// The run's root span ended well: OK, not "unset".
	var rootStatus string
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`#trace .span-row[data-depth="0"] a[data-select]`),
		chromedp.WaitVisible(`#span-detail [data-testid="span-status"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#span-detail [data-testid="span-status"]').textContent`, &rootStatus),
	))
	require.Contains(t, []string{"OK", "interrupted"}, rootStatus)
	require.Empty(t, br.Problems())
}
