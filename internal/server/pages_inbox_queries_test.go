package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// queryLog records the SQL a pool runs.
type queryLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *queryLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, d.SQL)
	return ctx
}

func (l *queryLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// tracedStore returns a store on a new test database whose every query is logged, and the
// database's URL.
func tracedStore(t *testing.T) (*store.Store, *queryLog, string) {
	t.Helper()
	dbURL := storetest.NewURL(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	log := &queryLog{}
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return store.New(pool), log, dbURL
}

// take returns the queries logged since the last take.
func (l *queryLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sql
	l.sql = nil
	return out
}

// TestInboxQueriesDoNotGrowWithInterrupts: the inbox shows each interrupt with its own run's
// action and history, and costs as many queries for seven interrupts over four runs as for one.
func TestInboxQueriesDoNotGrowWithInterrupts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, log, dbURL := tracedStore(t)
	// The run service, never started, only enables the routes; it gets a pool of its own so that
	// the log holds the pages' queries alone.
	other, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(other.Close)
	svc, err := runs.New(runs.Config{Workers: 0}, store.New(other), engine.NewRegistry())
	require.NoError(t, err)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: true, Version: "test"}, Deps{Store: st, Runs: svc})
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	url := "http://" + srv.Addr()

	type seeded struct {
		run    uuid.UUID
		action string
		ids    []uuid.UUID
	}
	seed := func(n int, interrupts int) seeded {
		action := fmt.Sprintf("/flow/inbox%d", n)
		run, err := st.RunCreate(ctx, store.RunCreateParams{Action: action})
		require.NoError(t, err)
		require.NoError(t, st.MessagePut(ctx, run.ID, 0, 0, "user",
			json.RawMessage(fmt.Sprintf(`{"role":"user","content":[{"text":"history of run %d"}]}`, n))))
		out := seeded{run: run.ID, action: action}
		for i := range interrupts {
			created, err := st.InterruptCreate(ctx, []store.InterruptCreateParams{{RunID: run.ID, Turn: 0,
				Tool: fmt.Sprintf("tool%d", i), Ref: fmt.Sprintf("ref%d", i), Input: json.RawMessage(`{}`),
				Metadata: json.RawMessage(fmt.Sprintf(`{"message":"question %d.%d"}`, n, i))}})
			require.NoError(t, err)
			out.ids = append(out.ids, created[0].ID)
		}
		return out
	}
	inbox := func(query string) (string, int) {
		t.Helper()
		log.take()
		resp, body := get(t, url+"/inbox"+query, "Accept", "text/html")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return body, len(log.take())
	}
	requireItem := func(body string, s seeded, i int) {
		t.Helper()
		start := strings.Index(body, `id="i-`+s.ids[i].String()+`"`)
		require.NotEqual(t, -1, start, "interrupt %s is listed", s.ids[i])
		item := body[start:]
		if end := strings.Index(item, "</li>"); end >= 0 {
			item = item[:end]
		}
		require.Contains(t, item, "<code>"+s.action+"</code>", "its own run's action")
		require.Contains(t, item, fmt.Sprintf("question %s", strings.TrimPrefix(s.action, "/flow/inbox")+"."+fmt.Sprint(i)))
	}
	// requireDetail: the selected item is shown in full beside the list, with its run's history.
	requireDetail := func(body string, s seeded, i int) {
		t.Helper()
		start := strings.Index(body, `id="d-`+s.ids[i].String()+`"`)
		require.NotEqual(t, -1, start, "interrupt %s is the one shown in full", s.ids[i])
		require.Contains(t, body[start:], "history of run "+strings.TrimPrefix(s.action, "/flow/inbox"), "its own run's history")
	}
	first := seed(0, 1)
	body, one := inbox("")
	requireItem(body, first, 0)
	requireDetail(body, first, 0)

	all := []seeded{first, seed(1, 2), seed(2, 1), seed(3, 3)}
	body, many := inbox("")
	require.Equal(t, 7, strings.Count(body, `<li class="inbox-item`))
	for _, s := range all {
		for i := range s.ids {
			requireItem(body, s, i)
		}
	}
	requireDetail(body, first, 0)
	require.Equal(t, one, many, "the inbox's queries must not grow with its interrupts")

	body, filtered := inbox("?action=/flow/inbox3&tool=tool1")
	require.Equal(t, 1, strings.Count(body, `<li class="inbox-item`))
	requireItem(body, all[3], 1)
	requireDetail(body, all[3], 1)
	require.Equal(t, one, filtered)
	for _, s := range all {
		require.Contains(t, body, `value="`+s.action+`"`, "the action filter still offers every action")
	}
}
