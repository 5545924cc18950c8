package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// gatedModel is an OpenAI-compatible chat completions endpoint on loopback that plays the travel
// agent's model with gates the test opens: asked first, it waits for start, streams intro word by
// word and calls bookFlight (which asks a reviewer); given the booking, it streams the first
// answerHalf words of answer, says so on atGate, waits for rest, then streams the others.
type gatedModel struct {
	url    string
	start  chan struct{}
	rest   chan struct{}
	atGate chan struct{}
	gateMu sync.Once
}

const (
	scaleIntro      = "Checking flights to Lisbon for you now, one moment please while I look them up. "
	scaleAnswerHalf = 20
)

// scaleAnswer is the final answer: 40 words, each streamed as one delta.
var scaleAnswer = func() string {
	var b strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "word%02d ", i)
	}
	return b.String()
}()

func newGatedModel(t *testing.T) *gatedModel {
	t.Helper()
	m := &gatedModel{start: make(chan struct{}), rest: make(chan struct{}), atGate: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	var once sync.Once
	open := func() {
		once.Do(func() {
			select {
			case <-m.start:
			default:
				close(m.start)
			}
			select {
			case <-m.rest:
			default:
				close(m.rest)
			}
		})
	}
	// Handlers still waiting at a gate when the test ends are let go before the server closes.
	t.Cleanup(func() { open(); srv.Close() })
	m.url = srv.URL
	return m
}

func (m *gatedModel) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Stream bool `json:"stream"`
	}
	raw, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/chat/completions" || json.Unmarshal(raw, &body) != nil || !body.Stream || len(body.Messages) == 0 {
		http.Error(w, `{"error":{"message":"want a streamed chat completion"}}`, http.StatusBadRequest)
		return
	}
	flusher := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		v["id"], v["object"], v["created"], v["model"] = "c1", "chat.completion.chunk", 1, "gpt-4o-mini"
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", data)
		flusher.Flush()
	}
	text := func(s string) {
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}}}})
	}
	wait := func(gate chan struct{}) bool {
		select {
		case <-gate:
			return true
		case <-r.Context().Done():
			return false
		}
	}
	words := func(s string) []string { return strings.SplitAfter(strings.TrimSpace(s), " ") }
	if body.Messages[len(body.Messages)-1].Role != "tool" {
		if !wait(m.start) {
			return
		}
		for _, word := range words(scaleIntro) {
			text(word)
		}
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "delta": map[string]any{
			"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function", "function": map[string]any{
				"name": "bookFlight", "arguments": `{"destination":"Lisbon","date":"next Friday","class":"economy"}`,
			}}},
		}}}})
	} else {
		answer := words(scaleAnswer)
		for _, word := range answer[:scaleAnswerHalf] {
			text(word)
		}
		m.gateMu.Do(func() { close(m.atGate) })
		if !wait(m.rest) {
			return
		}
		for _, word := range answer[scaleAnswerHalf:] {
			text(word)
		}
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "delta": map[string]any{}}}})
	}
	send(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// failover is a reverse proxy in front of several `devui serve`, as a load balancer: each request
// goes to the first backend that accepts a connection, so that when the first dies its pages'
// requests and WebSocket reconnections go to the next; a GET that its backend dropped unanswered
// is tried on the next one (nginx's proxy_next_upstream error). The Host header is kept, so that
// the servers' loopback and same-origin checks see the address the browser used.
type failover struct {
	url      string
	backends []string

	mu       sync.Mutex
	upgrades []string // the backend of each WebSocket handshake, in order
}

// attempt is one request's way through the backends: those that failed it, and the one it is on.
type attempt struct {
	failed []string
	dialed string
}

type attemptKey struct{}

func newFailover(t *testing.T, backends ...string) *failover {
	t.Helper()
	f := &failover{backends: backends}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "backend"})
			r.Out.Host = r.In.Host
			r.Out = r.Out.WithContext(context.WithValue(r.Out.Context(), attemptKey{}, &attempt{}))
		},
		Transport: f,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				at, _ := resp.Request.Context().Value(attemptKey{}).(*attempt)
				f.mu.Lock()
				f.upgrades = append(f.upgrades, at.dialed)
				f.mu.Unlock()
			}
			return nil
		},
		ErrorLog: log.New(io.Discard, "", 0), // a refused backend is the point, not news
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// RoundTrip sends the request to the first backend that accepts it, and a GET again to the next
// when its backend drops it.
func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	at, _ := req.Context().Value(attemptKey{}).(*attempt)
	var dialer net.Dialer
	transport := &http.Transport{
		DisableKeepAlives: true, // every request picks its backend afresh
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var errs error
			for _, b := range f.backends {
				if slices.Contains(at.failed, b) {
					continue
				}
				conn, err := dialer.DialContext(ctx, network, b)
				if err == nil {
					at.dialed = b
					return conn, nil
				}
				errs = errors.Join(errs, err)
			}
			return nil, errors.Join(errs, errors.New("no backend left"))
		},
	}
	for {
		at.dialed = ""
		resp, err := transport.RoundTrip(req)
		if err == nil || req.Method != http.MethodGet || at.dialed == "" || req.Context().Err() != nil {
			return resp, err
		}
		at.failed = append(at.failed, at.dialed)
	}
}

// webSockets returns the backend of each WebSocket the proxy has passed, in order.
func (f *failover) webSockets() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.upgrades)
}

// subscribeFrame is a subscribe message the page sent over its WebSocket, and when.
type subscribeFrame struct {
	at    time.Time
	topic string
	after int64
}

// TestThreeServesAndThreeWorkersShareOnePostgres is issue #27's scale-out, with real processes on
// one PostgreSQL: three `devui serve` (A, B, C; --workers 0, so they execute nothing) and three
// `devui worker`, all six started together on an empty database. It checks that
//   - all six come up and the schema is applied once: one process applies every migration, each
//     is recorded once, and the schema is at the latest;
//   - the three workers announce themselves, and every run (a travel agent run started through C,
//     nine countdowns started through A, B and C) is executed by a worker process, never a serve;
//   - a real Chromium on A's run page (through a failover proxy, as behind a load balancer) shows
//     the run's chunks as the worker streams them, every one arriving live over the WebSocket;
//   - a reviewer resolves the booking's interrupt through B's API, and the run resumes;
//   - A is SIGKILLed in the middle of the answer's stream; the page reconnects through the proxy
//     to B, subscribing from the last sequence number it showed, and ends showing exactly the
//     run's chunks, in order, none missing, none twice, with the same text as the database, with
//     no failed request, exception or CSP violation on the page;
//   - every run ends (succeeded, from the database), no run job is left unfinished, and the
//     processes' connections stay within the budget: --max-conns each, plus the live hub's LISTEN
//     connection, plus River's in a worker;
//   - the surviving five stop cleanly on SIGINT.
func TestThreeServesAndThreeWorkersShareOnePostgres(t *testing.T) {
	t.Parallel()
	const maxConns = 6
	bin := buildDevui(t)
	dbURL := storetest.NewEmptyURL(t)
	model := newGatedModel(t)
	dataDir := t.TempDir()
	env := []string{"OPENAI_BASE_URL=" + model.url + "/v1", "OPENAI_API_KEY=sk-test"}
	common := []string{"--database-url", dbURL, "--max-conns", strconv.Itoa(maxConns)}

	// All six at once, as a deploy's first boot.
	var serves, workers []*devuiProcess
	for range 3 {
		addr := freePort(t)
		p := runDevuiEnv(t, bin, dataDir, env, append([]string{"serve", "--dev", "--addr", addr, "--workers", "0"}, common...)...)
		p.url = "http://" + addr
		serves = append(serves, p)
	}
	for range 3 {
		workers = append(workers, runDevuiEnv(t, bin, dataDir, env, append([]string{"worker", "--workers", "4"}, common...)...))
	}
	a, b, c := serves[0], serves[1], serves[2]
	all := append(slices.Clone(serves), workers...)

	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	pcfg.MaxConns = 2
	pcfg.ConnConfig.RuntimeParams["application_name"] = "scale-test"
	db, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	peak := watchConnections(t, dbURL)

	for _, s := range serves {
		s.waitReady(t, 2*time.Minute)
	}
	workerPIDs := map[int]bool{}
	for _, w := range workers {
		workerPIDs[w.cmd.Process.Pid] = true
	}
	eventually(t, 2*time.Minute, "the three workers announce themselves", func() (bool, string) {
		for _, w := range workers {
			select {
			case <-w.exited:
				t.Fatalf("devui worker exited (%v): %s", w.waitErr, w.log.String())
			default:
			}
		}
		rows, _ := db.Query(ctx, `SELECT instance FROM action_catalogue_workers WHERE expires_at > now()`)
		instances, err := pgx.CollectRows(rows, pgx.RowTo[string])
		announced := 0
		for _, in := range instances {
			if workerPIDs[ownerPID(in)] {
				announced++
			}
		}
		return err == nil && announced == 3 && len(instances) == 3, fmt.Sprintf("%v %v", instances, err)
	})

	// The schema, applied once.
	status, err := store.Migrations(ctx, db)
	require.NoError(t, err)
	require.True(t, status.UpToDate(), "the schema is at the latest migration: %+v", status)
	var rows, versions int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&rows, &versions))
	require.Equal(t, versions, rows, "each migration is recorded once")
	applied := 0
	for _, p := range all {
		if strings.Contains(p.log.String(), "applied migrations") {
			applied++
		}
	}
	require.Equal(t, 1, applied, "one process of six applied the migrations; the others found them applied")

	// Countdowns through each serve, to be executed by the workers meanwhile.
	var countdowns []string
	for i := range 9 {
		countdowns = append(countdowns, serves[i%3].startRun(t, 3))
	}

	// The travel agent's run, started through C.
	code, _, body := c.httpDo(t, http.MethodPost, "/api/v1/runs", `{"action":"/flow/travelAgent","input":{"destination":"Lisbon"}}`)
	require.Equal(t, http.StatusCreated, code, body)
	var run struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &run))

	// The page, through the proxy, on A while A lives.
	proxy := newFailover(t, strings.TrimPrefix(a.url, "http://"), strings.TrimPrefix(b.url, "http://"))
	br := browsertest.New(t)
	var framesMu sync.Mutex
	var frames []subscribeFrame
	chromedp.ListenTarget(br.Ctx, func(ev any) {
		if ev, ok := ev.(*network.EventWebSocketFrameSent); ok {
			var m struct {
				Type  string `json:"type"`
				Topic string `json:"topic"`
				After int64  `json:"after"`
			}
			if json.Unmarshal([]byte(ev.Response.PayloadData), &m) == nil && m.Type == "subscribe" {
				framesMu.Lock()
				frames = append(frames, subscribeFrame{at: time.Now(), topic: m.Topic, after: m.After})
				framesMu.Unlock()
			}
		}
	})
	var after string
	require.NoError(t, br.Run(
		network.Enable(),
		chromedp.Navigate(proxy.url+"/runs/"+run.ID+"?tab=stream"),
		chromedp.WaitVisible(`#chunks`, chromedp.ByQuery),
		pollJS(`document.documentElement.dataset.live === "live"`),
		chromedp.Evaluate(`document.getElementById("page").dataset.after`, &after),
		chromedp.Evaluate(`window.scaleMarker = "the same page"`, nil),
	))
	require.Equal(t, "0", after, "the page was rendered with no chunk: every chunk it shows comes live")
	require.Equal(t, []string{strings.TrimPrefix(a.url, "http://")}, proxy.webSockets(), "the page's WebSocket is on A")

	shown := func() int {
		var n int
		require.NoError(t, br.Run(chromedp.Evaluate(`document.querySelectorAll("#chunks span[data-seq]").length`, &n)))
		return n
	}
	stored := func() int {
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM run_chunks WHERE run_id = $1`, run.ID).Scan(&n))
		return n
	}
	runStatus := func(id string) string {
		var s string
		require.NoError(t, db.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, id).Scan(&s))
		return s
	}

	// The model streams its intro and asks for the booking: the page shows it as it comes.
	close(model.start)
	eventually(t, time.Minute, "the run waits for a reviewer", func() (bool, string) {
		s := runStatus(run.ID)
		return s == "interrupted", s
	})
	intro := stored()
	require.GreaterOrEqual(t, intro, len(strings.Fields(scaleIntro)), "each word of the intro is a chunk")
	eventually(t, time.Minute, "A's page shows the intro's chunks", func() (bool, string) {
		n := shown()
		return n == intro, fmt.Sprintf("%d shown of %d", n, intro)
	})

	// A reviewer approves the booking through B.
	code, _, body = b.httpDo(t, http.MethodGet, "/api/v1/interrupts?status=pending", "")
	require.Equal(t, http.StatusOK, code, body)
	var pending struct {
		Interrupts []struct {
			ID      string `json:"id"`
			RunID   string `json:"run_id"`
			Tool    string `json:"tool"`
			Version int    `json:"version"`
		} `json:"interrupts"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &pending))
	require.Len(t, pending.Interrupts, 1, body)
	in := pending.Interrupts[0]
	require.Equal(t, run.ID, in.RunID)
	require.Equal(t, "bookFlight", in.Tool)
	code, _, body = b.httpDo(t, http.MethodPost, "/api/v1/interrupts/"+in.ID+"/resolve", fmt.Sprintf(`{"action":"approve","version":%d}`, in.Version))
	require.Equal(t, http.StatusOK, code, body)

	// The resumed run streams half its answer and the model holds the rest.
	select {
	case <-model.atGate:
	case <-time.After(time.Minute):
		t.Fatalf("the resumed run did not stream its answer; run %s", runStatus(run.ID))
	}
	var beforeKill int
	eventually(t, time.Minute, "A's page shows the answer's first half", func() (bool, string) {
		db, page := stored(), shown()
		beforeKill = page
		return db >= intro+scaleAnswerHalf && page == db, fmt.Sprintf("%d shown of %d stored, want %d", page, db, intro+scaleAnswerHalf)
	})

	// A dies mid-stream; the rest of the answer streams while the page finds B.
	killedAt := time.Now()
	a.kill9(t)
	close(model.rest)
	eventually(t, time.Minute, "the run succeeds", func() (bool, string) {
		s := runStatus(run.ID)
		return s == "succeeded", s
	})
	total := stored()
	require.GreaterOrEqual(t, total, intro+len(strings.Fields(scaleAnswer)), "a chunk per streamed word of the answer, after the intro's")
	eventually(t, time.Minute, "the page, reconnected, shows every chunk", func() (bool, string) {
		var live string
		require.NoError(t, br.Run(chromedp.Evaluate(`document.documentElement.dataset.live`, &live)))
		n := shown()
		return n == total && live == "live", fmt.Sprintf("%d shown of %d, live %q", n, total, live)
	})

	// Reconnected to B, from its offset, on the same page.
	sockets := proxy.webSockets()
	require.GreaterOrEqual(t, len(sockets), 2, "the page opened a second WebSocket")
	require.Equal(t, strings.TrimPrefix(b.url, "http://"), sockets[len(sockets)-1], "the page's WebSocket is now on B")
	var marker string
	require.NoError(t, br.Run(chromedp.Evaluate(`window.scaleMarker`, &marker)))
	require.Equal(t, "the same page", marker, "the page was not reloaded")
	framesMu.Lock()
	var resubscribed []int64
	for _, f := range frames {
		if f.topic == "run:"+run.ID && f.at.After(killedAt) {
			resubscribed = append(resubscribed, f.after)
		}
	}
	framesMu.Unlock()
	require.NotEmpty(t, resubscribed, "the page subscribed again after A died")
	require.Equal(t, int64(beforeKill), resubscribed[0], "it subscribed from the last sequence number it showed")

	// Exactly the run's chunks, in order, with the database's text.
	var page []struct {
		Seq  int64  `json:"seq"`
		Text string `json:"text"`
	}
	require.NoError(t, br.Run(chromedp.Evaluate(`[...document.querySelectorAll("#chunks span[data-seq]")].map(s => ({seq: Number(s.dataset.seq), text: s.textContent}))`, &page)))
	chunkRows, err := db.Query(ctx, `SELECT seq, content::text FROM run_chunks WHERE run_id = $1 ORDER BY seq`, run.ID)
	require.NoError(t, err)
	type chunk struct {
		Seq     int64
		Content string
	}
	chunks, err := pgx.CollectRows(chunkRows, pgx.RowToStructByPos[chunk])
	require.NoError(t, err)
	require.Len(t, page, len(chunks))
	var pageText, dbText strings.Builder
	for i, ch := range chunks {
		require.Equal(t, ch.Seq, page[i].Seq, "chunk %d of the page is the database's", i)
		var parts []struct {
			Text string `json:"text"`
		}
		require.NoError(t, json.Unmarshal([]byte(ch.Content), &parts), ch.Content)
		text := ""
		for _, p := range parts {
			text += p.Text
		}
		if text != "" {
			require.Equal(t, text, page[i].Text, "chunk %d's text", ch.Seq)
		}
		dbText.WriteString(text)
		pageText.WriteString(page[i].Text)
	}
	require.Equal(t, 1, strings.Count(pageText.String(), strings.TrimSpace(scaleAnswer)), "the answer shows once, whole: %q", pageText.String())
	require.Equal(t, 1, strings.Count(pageText.String(), strings.TrimSpace(scaleIntro)), "the intro shows once, whole")
	require.Contains(t, dbText.String(), strings.TrimSpace(scaleAnswer))

	require.Empty(t, br.Problems(), "no failed request, exception or CSP violation on the page")

	// Every run ends, executed by the workers.
	for _, id := range countdowns {
		eventually(t, time.Minute, "countdown "+id+" succeeds", func() (bool, string) {
			s := runStatus(id)
			return s == "succeeded", s
		})
	}
	var unfinished int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM runs WHERE status <> 'succeeded'`).Scan(&unfinished))
	require.Zero(t, unfinished, "every run succeeded")
	// River marks a job completed a moment after its Work returns (its completer batches the
	// updates), and a run is succeeded inside Work: the jobs are read until they are all marked.
	// (CI saw one still running just after its run had succeeded.)
	eventually(t, time.Minute, "every run job completed", func() (bool, string) {
		var states string
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*), coalesce(string_agg(state::text, ','), '')
			FROM river_job WHERE kind = 'loupe.run' AND state <> 'completed'`).Scan(&unfinished, &states))
		return unfinished == 0, states
	})
	jobRows, err := db.Query(ctx, `SELECT args->>'run_id', attempted_by FROM river_job WHERE kind = 'loupe.run'`)
	require.NoError(t, err)
	type job struct {
		RunID       string
		AttemptedBy []string
	}
	jobs, err := pgx.CollectRows(jobRows, pgx.RowToStructByPos[job])
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(jobs), 11, "a job per countdown, and the travel run's start and resume")
	byWorker := map[int]int{}
	for _, j := range jobs {
		require.NotEmpty(t, j.AttemptedBy, "job of run %s", j.RunID)
		for _, owner := range j.AttemptedBy {
			require.True(t, workerPIDs[ownerPID(owner)], "run %s executed by %s, a worker process", j.RunID, owner)
			byWorker[ownerPID(owner)]++
		}
	}
	t.Logf("run jobs per worker process: %v", byWorker)

	// Each process within its budget: its pool's --max-conns, the live hub's LISTEN connection, and
	// in a worker River's LISTEN connection; both leave the pool.
	require.LessOrEqual(t, peak(), len(serves)*(maxConns+1)+len(workers)*(maxConns+2), "connections to the database, at their peak")
	t.Logf("connections to the database at their peak: %d (6 processes, --max-conns %d)", peak(), maxConns)

	// The survivors stop cleanly.
	for _, p := range all[1:] {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	}
	for _, p := range all[1:] {
		require.NoError(t, p.wait(t, time.Minute), "exits cleanly on SIGINT: %s", p.log.String())
	}
}

// ownerPID is the process id in a run service's owner name (host-pid-random), or 0.
func ownerPID(owner string) int {
	fields := strings.Split(owner, "-")
	if len(fields) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(fields[len(fields)-2])
	return pid
}

// watchConnections samples the database's connections from the processes under test (not the
// test's own) every 50 ms until the test ends, and returns a function that reports the peak.
func watchConnections(t *testing.T, dbURL string) func() int {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.RuntimeParams["application_name"] = "scale-test"
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	var mu sync.Mutex
	peak := 0
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			var n int
			if conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name <> 'scale-test'`).Scan(&n) == nil {
				mu.Lock()
				peak = max(peak, n)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		conn.Close(context.Background())
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// pollJS waits until a JavaScript expression holds in the page.
func pollJS(expr string) chromedp.Action {
	return chromedp.Poll(expr, nil, chromedp.WithPollingTimeout(time.Minute), chromedp.WithPollingInterval(25*time.Millisecond))
}
