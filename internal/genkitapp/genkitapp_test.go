package genkitapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(storetest.LeakOptions(),
		// http.DefaultTransport's idle connections to the apps.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)...)
}

// bundle is a Loupe server's side of the tests: an insert-only run service, as devui start's, and
// the Manager attached to the project's apps.
type bundle struct {
	store   *store.Store
	runs    *runs.Service
	apps    *genkitapp.Manager
	project string
}

func setup(t *testing.T, project string) *bundle {
	t.Helper()
	return setupWatching(t, project, 3*time.Second, 100*time.Millisecond)
}

// setupWatching is setup with the app run services' lease TTL and the watcher's interval (its
// first look is in Start).
func setupWatching(t *testing.T, project string, leaseTTL, interval time.Duration) *bundle {
	t.Helper()
	st := storetest.New(t)
	svc, err := runs.New(runs.Config{Program: "devui", Workers: 0}, st, engine.NewRegistry())
	require.NoError(t, err)
	m := genkitapp.New(genkitapp.Config{Projects: []string{project}, Store: st, LeaseTTL: leaseTTL, Interval: interval})
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(m.Stop)
	return &bundle{store: st, runs: svc, apps: m, project: project}
}

// waitLive waits until the app is attached with its actions announced.
func (b *bundle) waitLive(t *testing.T, app string) {
	t.Helper()
	require.Eventually(t, func() bool {
		d, err := b.runs.Actions(context.Background())
		require.NoError(t, err)
		for _, a := range d {
			if a.Key == genkitapp.Key(app, "/flow/weatherFlow") {
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "the app's actions are in the catalogue")
}

func (b *bundle) start(t *testing.T, action, input string) *store.Run {
	t.Helper()
	run, err := b.runs.StartRun(context.Background(), runs.StartParams{Action: action, Input: json.RawMessage(input), CreatedBy: "test"})
	require.NoError(t, err)
	return run
}

// wait waits for the run to reach the status, failing at once on failed.
func (b *bundle) wait(t *testing.T, id uuid.UUID, status string) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = b.store.RunGet(context.Background(), id)
		require.NoError(t, err)
		if run.Status == store.RunFailed && status != store.RunFailed {
			t.Fatalf("run %s failed: %s", id, run.Error)
		}
		return run.Status == status
	}, 60*time.Second, 50*time.Millisecond, "run %s reaches %s", id, status)
	return run
}

func (b *bundle) pending(t *testing.T, id uuid.UUID) *store.Interrupt {
	t.Helper()
	list, err := b.store.InterruptListByRun(context.Background(), id)
	require.NoError(t, err)
	for _, it := range list {
		if it.Status == store.InterruptPending {
			return it
		}
	}
	t.Fatalf("run %s has no pending interrupt", id)
	return nil
}

// lastText is the text of the run's last recorded message.
func (b *bundle) lastText(t *testing.T, id uuid.UUID) string {
	t.Helper()
	msgs, err := b.store.MessageList(context.Background(), id)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	var m engine.Message
	require.NoError(t, json.Unmarshal(msgs[len(msgs)-1].Content, &m))
	return m.Text()
}

// TestAppFlowsRunAsDurableRuns attaches to a real Genkit JS app through its runtime file, lists
// its actions under its name, and runs two of its flows as Loupe runs: the output, the trace id
// the app returned, and the chunks of a streaming flow are the run's.
func TestAppFlowsRunAsDurableRuns(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	genkitapptest.Start(t, dir, "flows")
	b := setup(t, dir)
	b.waitLive(t, "flows")

	descs, err := b.runs.Actions(context.Background())
	require.NoError(t, err)
	keys := map[string]*engine.ActionDesc{}
	for _, d := range descs {
		keys[d.Key] = d
	}
	for _, k := range []string{"/flow/countdown", "/prompt/transferPrompt", "/tool/approveTransfer", "/model/scripted", "/util/generate"} {
		require.Contains(t, keys, genkitapp.Key("flows", k))
	}
	require.Contains(t, keys, "/util/generate", "Loupe's own generate is still there, apart from the app's")
	weather := keys[genkitapp.Key("flows", "/flow/weatherFlow")]
	require.Equal(t, engine.ActionTypeFlow, weather.Type)
	require.Equal(t, "flows", weather.Metadata[genkitapp.MetaApp])
	require.NotNil(t, weather.InputSchema, "the app's schema comes along")

	_, err = b.runs.StartRun(context.Background(), runs.StartParams{Action: genkitapp.Key("flows", "/flow/weatherFlow"), Input: json.RawMessage(`{"town":1}`)})
	require.ErrorIs(t, err, runs.ErrInvalid, "input is checked against the app's schema")

	run := b.start(t, genkitapp.Key("flows", "/flow/weatherFlow"), `{"city":"Oslo"}`)
	run = b.wait(t, run.ID, store.RunSucceeded)
	require.JSONEq(t, `"Done: getWeather={\"city\":\"Oslo\",\"tempC\":21}"`, string(run.Output))
	require.NotNil(t, run.TraceID)
	require.Len(t, *run.TraceID, 32, "the run is linked to the trace the app recorded")

	// A Genkit app's run can be re-run (in the app again), not replayed exactly: the app would run
	// its tools again.
	_, err = b.runs.Replay(context.Background(), runs.ReplayParams{RunID: run.ID, Mode: store.ReplayExact})
	var ve *runs.ValidationError
	require.True(t, errors.As(err, &ve), "got %v", err)
	require.Equal(t, "mode", ve.Field)
	again, err := b.runs.Replay(context.Background(), runs.ReplayParams{RunID: run.ID, Mode: store.ReplayRerun})
	require.NoError(t, err)
	again = b.wait(t, again.ID, store.RunSucceeded)
	require.JSONEq(t, string(run.Output), string(again.Output))

	run = b.start(t, genkitapp.Key("flows", "/flow/countdown"), `{"from":3}`)
	run = b.wait(t, run.ID, store.RunSucceeded)
	require.JSONEq(t, `"liftoff"`, string(run.Output))
	chunks, err := b.store.ChunkList(context.Background(), run.ID, 0, 100)
	require.NoError(t, err)
	require.Len(t, chunks, 3)
	for i, c := range chunks {
		require.JSONEq(t, `{"n":`+string(rune('3'-i))+`}`, string(c.Content))
	}
}

// TestInterruptedPromptResumesInTheApp runs the app's prompt, whose model asks the approveTransfer
// interrupt: the run waits with the interrupt in the inbox, schemas and question included; it
// cannot be approved (there is nothing to run again), the reviewer's answer is checked against the
// tool's output schema, and resumes the conversation
// through the app's own /util/generate (resume.respond), whose model then answers.
func TestInterruptedPromptResumesInTheApp(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	genkitapptest.Start(t, dir, "prompts")
	b := setup(t, dir)
	b.waitLive(t, "prompts")
	ctx := context.Background()

	run := b.start(t, genkitapp.Key("prompts", "/prompt/transferPrompt"), `{"to":"Bob","amount":50}`)
	b.wait(t, run.ID, store.RunInterrupted)
	it := b.pending(t, run.ID)
	require.Equal(t, "approveTransfer", it.Tool)
	require.JSONEq(t, `{"to":"Bob","amount":50}`, string(it.Input))
	require.JSONEq(t, `{"message":"Send 50 to Bob?"}`, string(it.Metadata))
	require.NotEmpty(t, it.OutputSchema)

	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita"})
	var ve *runs.ValidationError
	require.True(t, errors.As(err, &ve), "an interrupt that only asks (defineInterrupt: restartable=false) cannot be approved, got %v", err)
	require.Equal(t, "action", ve.Field)

	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionRespond, Output: json.RawMessage(`{"approved":"yes"}`), Actor: "rita"})
	require.True(t, errors.As(err, &ve), "got %v", err)
	require.Equal(t, "output/approved", ve.Field)

	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionRespond, Output: json.RawMessage(`{"approved":true}`), Actor: "rita"})
	require.NoError(t, err)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, `Done: approveTransfer={"approved":true}`, b.lastText(t, run.ID))
	// The scripted model counts a call's messages as its input tokens: 1 before the pause, 3 after.
	require.Equal(t, int64(4), done.InputTokens, "the run's tokens are the app's generates'")
	require.NotNil(t, done.Model)
	require.Equal(t, "scripted", *done.Model)
	var out struct {
		FinishReason string `json:"finishReason"`
	}
	require.NoError(t, json.Unmarshal(done.Output, &out))
	require.Equal(t, "stop", out.FinishReason)
	msgs, err := b.store.MessageList(ctx, run.ID)
	require.NoError(t, err)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []string{"user", "model", "tool", "model"}, roles, "the history is the whole conversation, across the pause")
}

// TestApprovedToolRestartsInTheApp approves, then edits, the call of a tool that interrupts until it
// is restarted: the app runs it (resume.restart with metadata.resumed), with the reviewer's input
// when edited. A flow that returns its interrupted generate response is resumed the same way, and
// a denial reaches its model as the tool's answer.
func TestApprovedToolRestartsInTheApp(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	genkitapptest.Start(t, dir, "restarts")
	b := setup(t, dir)
	b.waitLive(t, "restarts")
	ctx := context.Background()

	approved := b.start(t, genkitapp.Key("restarts", "/prompt/wirePrompt"), `{"to":"Eve","amount":7}`)
	edited := b.start(t, genkitapp.Key("restarts", "/prompt/wirePrompt"), `{"to":"Eve","amount":7}`)
	flow := b.start(t, genkitapp.Key("restarts", "/flow/transferFlow"), `{"to":"Ann","amount":3}`)
	for _, r := range []*store.Run{approved, edited, flow} {
		b.wait(t, r.ID, store.RunInterrupted)
	}
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, approved.ID).ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, edited.ID).ID, Action: runs.ActionEdit,
		Input: json.RawMessage(`{"to":"Mallory","amount":8}`), Actor: "rita"})
	require.NoError(t, err)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, flow.ID).ID, Action: runs.ActionDeny, Comment: "no way", Actor: "rita"})
	require.NoError(t, err)

	b.wait(t, approved.ID, store.RunSucceeded)
	require.Equal(t, `Done: transferMoney={"done":true,"to":"Eve","amount":7}`, b.lastText(t, approved.ID))
	b.wait(t, edited.ID, store.RunSucceeded)
	require.Equal(t, `Done: transferMoney={"done":true,"to":"Mallory","amount":8}`, b.lastText(t, edited.ID))
	b.wait(t, flow.ID, store.RunSucceeded)
	require.Contains(t, b.lastText(t, flow.ID), `"denied":true`)
	require.Contains(t, b.lastText(t, flow.ID), `"reason":"no way"`)
}

// TestAppsComeAndGo watches one project with two apps: both are listed, each under its name;
// one killed (its runtime file left behind, its pid dead) is shown as gone, its actions leave the
// catalogue and a run of them waits, saying why; a leftover runtime file of a dead process found at
// start is gone from the first.
func TestAppsComeAndGo(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	// A leftover of a crashed app: no process has that pid.
	require.NoError(t, os.MkdirAll(genkitapp.RuntimesDir(dir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(genkitapp.RuntimesDir(dir), "999999-1.json"),
		[]byte(`{"id":"999999","pid":999999,"name":"crashed","reflectionServerUrl":"http://127.0.0.1:9","timestamp":"2026-01-01T00:00:00Z"}`), 0o644))
	one := genkitapptest.Start(t, dir, "one")
	genkitapptest.Start(t, dir, "two")
	b := setup(t, dir)
	b.waitLive(t, "one")
	b.waitLive(t, "two")
	status := func(name string) genkitapp.AppStatus {
		for _, a := range b.apps.Apps() {
			if a.Name == name {
				return a
			}
		}
		t.Fatalf("no app %s in %+v", name, b.apps.Apps())
		return genkitapp.AppStatus{}
	}
	require.False(t, status("crashed").Live)
	require.Contains(t, status("crashed").Reason, "process 999999 exited")
	require.True(t, status("one").Live)
	require.Equal(t, "nodejs/1.42.0", status("one").GenkitVersion)

	one.Kill(t)
	require.Eventually(t, func() bool {
		s := status("one")
		return !s.Live && strings.Contains(s.Reason, "exited")
	}, 30*time.Second, 50*time.Millisecond, "gone, since its process exited")
	require.True(t, status("two").Live)
	descs, err := b.runs.Actions(context.Background())
	require.NoError(t, err)
	for _, d := range descs {
		require.NotEqual(t, "one", d.Metadata[genkitapp.MetaApp], "a gone app's actions are not live")
	}
	run := b.start(t, genkitapp.Key("one", "/flow/echo"), `"hi"`)
	reason, err := b.runs.WaitingReason(context.Background(), run)
	require.NoError(t, err)
	require.Contains(t, reason, "program genkit:one")
}

// TestProjectRootsAreWhereGenkitWritesRuntimeFiles finds a project's roots as Genkit does, from
// a working directory: JS's nearest package.json, Go's nearest go.mod, both for a JS app inside a Go
// module, and the directory itself when there is neither.
func TestProjectRootsAreWhereGenkitWritesRuntimeFiles(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	js := filepath.Join(repo, "web", "app")
	src := filepath.Join(js, "src")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(js, "package.json"), []byte("{}"), 0o644))
	require.Equal(t, []string{js, repo}, genkitapp.ProjectRoots(src))
	require.Equal(t, []string{repo}, genkitapp.ProjectRoots(filepath.Join(repo, "web")))
	lone := t.TempDir()
	require.Equal(t, []string{lone}, genkitapp.ProjectRoots(lone))
}

// TestInterruptSurvivesTheAppsRestart interrupts two runs of the app's prompt, kills the app and
// starts it again (a new process, the same name): the interrupts wait in the database meanwhile.
// One resolved while the app is gone waits for it; the other is resolved once the new process is
// attached; both conversations go on there, from the history Loupe kept, to the model's answer.
func TestInterruptSurvivesTheAppsRestart(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	first := genkitapptest.Start(t, dir, "phoenix")
	b := setup(t, dir)
	b.waitLive(t, "phoenix")
	ctx := context.Background()
	status := func() genkitapp.AppStatus {
		for _, a := range b.apps.Apps() {
			if a.Name == "phoenix" {
				return a
			}
		}
		return genkitapp.AppStatus{}
	}
	before := status()
	require.True(t, before.Live)

	run := b.start(t, genkitapp.Key("phoenix", "/prompt/transferPrompt"), `{"to":"Bob","amount":50}`)
	early := b.start(t, genkitapp.Key("phoenix", "/prompt/transferPrompt"), `{"to":"Ann","amount":5}`)
	b.wait(t, run.ID, store.RunInterrupted)
	b.wait(t, early.ID, store.RunInterrupted)
	it := b.pending(t, run.ID)

	first.Kill(t)
	require.Eventually(t, func() bool { return !status().Live }, 30*time.Second, 50*time.Millisecond, "the app is seen gone")
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, early.ID).ID, Action: runs.ActionRespond,
		Output: json.RawMessage(`{"approved":false,"note":"too late"}`), Actor: "rita"})
	require.NoError(t, err, "an answer is taken while the app is gone")
	genkitapptest.Start(t, dir, "phoenix")
	require.Eventually(t, func() bool {
		s := status()
		return s.Live && s.PID != before.PID
	}, 60*time.Second, 50*time.Millisecond, "the new process is attached under the same name")

	stored, err := b.store.InterruptGet(ctx, it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, stored.Status, "the interrupt outlived the process that asked it")
	b.wait(t, early.ID, store.RunSucceeded)
	require.Equal(t, `Done: approveTransfer={"approved":false,"note":"too late"}`, b.lastText(t, early.ID), "the answer given while the app was gone reached the new process")
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionRespond, Output: json.RawMessage(`{"approved":true}`), Actor: "rita"})
	require.NoError(t, err)
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, `Done: approveTransfer={"approved":true}`, b.lastText(t, run.ID), "the new process's model answered")
	msgs, err := b.store.MessageList(ctx, run.ID)
	require.NoError(t, err)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []string{"user", "model", "tool", "model"}, roles, "the whole conversation, across the restart")
}

// TestAnswerGivenAsTheAppDiesWaitsForItsReturn answers an interrupt just after the app was killed,
// before Loupe has seen it go (its watcher looks every 10 s here): the app's run service tries the
// resume, which cannot reach the app, and the run waits instead of failing with the refused
// connection; started again, the app takes the conversation on to its model's answer.
func TestAnswerGivenAsTheAppDiesWaitsForItsReturn(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	first := genkitapptest.Start(t, dir, "lazarus")
	// The watcher's first look is in Start: the next is 10 s away, long after the resume is tried.
	b := setupWatching(t, dir, time.Second, 10*time.Second)
	st, m := b.store, b.apps
	b.waitLive(t, "lazarus")
	ctx := context.Background()
	live := func() bool {
		for _, a := range m.Apps() {
			if a.Name == "lazarus" {
				return a.Live
			}
		}
		return false
	}

	run := b.start(t, genkitapp.Key("lazarus", "/prompt/transferPrompt"), `{"to":"Bob","amount":50}`)
	interrupted := b.wait(t, run.ID, store.RunInterrupted)
	it := b.pending(t, run.ID)
	first.Kill(t)
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionRespond, Output: json.RawMessage(`{"approved":true}`), Actor: "rita"})
	require.NoError(t, err)
	require.True(t, live(), "Loupe has not seen the app go yet")
	require.Eventually(t, func() bool {
		r, err := st.RunGet(ctx, run.ID)
		require.NoError(t, err)
		require.NotEqual(t, store.RunFailed, r.Status, "the run failed: %s", r.Error)
		return r.LeaseEpoch > interrupted.LeaseEpoch && r.Status == store.RunQueued
	}, 8*time.Second, 20*time.Millisecond, "the app's run service tried the resume, and queued the run again to wait for the app")
	// Once the app is seen gone, its run service has stopped: whatever it tried is over.
	require.Eventually(t, func() bool { return !live() }, 30*time.Second, 50*time.Millisecond)
	r, err := st.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.NotEqual(t, store.RunFailed, r.Status, "a resume that cannot reach the app waits for it: %s", r.Error)

	genkitapptest.Start(t, dir, "lazarus")
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, `Done: approveTransfer={"approved":true}`, b.lastText(t, run.ID))
}

// TestAnotherAppOnTheDeadAppsPortIsNotSentItsRuns answers an interrupt after the app died and
// another program took its port, as the next Genkit app started anywhere on the machine does
// (each takes the first free port from 3100): the program there says it is another runtime, so
// the resume is not sent to it; the run waits queued for its own app, which takes it on when it
// is back.
func TestAnotherAppOnTheDeadAppsPortIsNotSentItsRuns(t *testing.T) {
	dir := genkitapptest.Project(t)
	first := genkitapptest.Start(t, dir, "dorian")
	// The watcher's next look (20 s after its first, in Start) comes after the resume is tried:
	// the app is still taken as live then, and only the run's own check keeps the run from the
	// other program.
	b := setupWatching(t, dir, time.Second, 20*time.Second)
	st, m := b.store, b.apps
	b.waitLive(t, "dorian")
	var appURL string
	for _, a := range m.Apps() {
		if a.Name == "dorian" {
			appURL = a.URL
		}
	}
	u, err := url.Parse(appURL)
	require.NoError(t, err)

	run := b.start(t, genkitapp.Key("dorian", "/prompt/transferPrompt"), `{"to":"Bob","amount":50}`)
	interrupted := b.wait(t, run.ID, store.RunInterrupted)
	it := b.pending(t, run.ID)
	first.Kill(t)
	var mu sync.Mutex
	var asked []string
	ln, err := net.Listen("tcp", ":"+u.Port())
	require.NoError(t, err, "take the dead app's port")
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/api/__health" && r.URL.Query().Get("id") != "" && r.URL.Query().Get("id") != "other-1" {
			http.Error(w, "Invalid runtime ID", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"result":{"finishReason":"stop","message":{"role":"model","content":[{"text":"the other app answered"}]}},"telemetry":{"traceId":"0af7651916cd43dd8448eb211c80319c"}}`)
	})}
	go func() { _ = other.Serve(ln) }()
	closed := false
	closeOther := func() {
		if !closed {
			closed = true
			_ = other.Close()
		}
	}
	t.Cleanup(closeOther)

	_, err = b.runs.Resolve(context.Background(), runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionRespond, Output: json.RawMessage(`{"approved":true}`), Actor: "rita"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err := st.RunGet(context.Background(), run.ID)
		require.NoError(t, err)
		require.NotEqual(t, store.RunFailed, r.Status, "the run failed: %s", r.Error)
		require.NotEqual(t, store.RunSucceeded, r.Status, "the run was resumed in the other app")
		return r.LeaseEpoch > interrupted.LeaseEpoch && r.Status == store.RunQueued
	}, 15*time.Second, 20*time.Millisecond, "the resume was tried, and the run queued again to wait for its app")
	mu.Lock()
	require.NotEmpty(t, asked, "the other program was asked who it is")
	for _, a := range asked {
		require.Equal(t, "GET /api/__health", a, "only asked who it is, never sent the run")
	}
	mu.Unlock()

	closeOther()
	genkitapptest.Start(t, dir, "dorian")
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, `Done: approveTransfer={"approved":true}`, b.lastText(t, run.ID))
}
