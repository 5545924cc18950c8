package server

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestRunHeaderStopsCountingWhileInterrupted: an interrupted run's duration is the time it ran
// until the interrupt, and the header says since when it waits.
func TestRunHeaderStopsCountingWhileInterrupted(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/wait", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	leased, err := b.store.RunAcquire(ctx, run.ID, "test", time.Minute)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	run, err = b.store.RunFinish(ctx, store.RunFinishParams{ID: run.ID, Epoch: leased.LeaseEpoch, Status: store.RunInterrupted})
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond) // a clock that kept counting would show over a second
	want := fmtNanos(run.UpdatedAt.Sub(*run.StartedAt).Nanoseconds())
	_, body := get(t, b.url+"/runs/"+run.ID.String())
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(body, "")
	require.Contains(t, text, "Ran for"+want+" until the interrupt")
	require.Regexp(t, `Waiting for a reviewersince \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`, text)
	_, body = get(t, b.url+"/runs?status=interrupted", "Accept", "text/html")
	require.Contains(t, body, ">"+want+"<", "the runs list stops counting too")
}

// TestRunPageWordingWhenEnded: an ended run's stream is not "live" and says nothing was
// streamed; times say their zone.
func TestRunPageWordingWhenEnded(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true, noRuns: true})
	ctx := context.Background()
	run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x", Input: json.RawMessage(`{}`), CreatedBy: "alice"})
	require.NoError(t, err)
	_, body := get(t, b.url+"/runs/"+run.ID.String()+"?tab=stream")
	require.Contains(t, body, `data-empty="No chunks yet."`)
	_, body = get(t, b.url+"/runs/"+run.ID.String()+"?tab=conversation")
	require.Contains(t, body, "No messages yet.")
	_, err = b.store.RunCancel(ctx, run.ID)
	require.NoError(t, err)
	_, body = get(t, b.url+"/runs/"+run.ID.String()+"?tab=stream")
	require.Contains(t, body, `data-empty="No chunks were streamed."`)
	_, body = get(t, b.url+"/runs/"+run.ID.String()+"?tab=conversation")
	require.Contains(t, body, "No messages were recorded.")
	require.Regexp(t, `\d\d:\d\d:\d\d UTC</time>`, body)

	br := browsertest.New(t)
	var state, empty string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()+"?tab=stream"),
		wait(`document.documentElement.dataset.live === "live"`),
		chromedp.Sleep(300*time.Millisecond),
		textOf("#stream-state", &state),
		chromedp.Evaluate(`document.getElementById("chunks").dataset.empty`, &empty),
	))
	require.Empty(t, state, "an ended run's stream is not live")
	require.Equal(t, "No chunks were streamed.", empty)
	require.Empty(t, br.Problems())
}
