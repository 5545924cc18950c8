package server

import (
	"context"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// wantAccess is who may call each route: adding a route means deciding here who may call it.
var wantAccess = map[string]access{
	"GET /healthz": accessPublic, "GET /readyz": accessPublic, "GET /metrics": accessPublic,
	"GET /static/*": accessPublic, "GET /login": accessPublic, "POST /login": accessPublic,
	"POST /api/notify": accessPublic, "GET /api/__health": accessPublic,

	"POST /api/traces": accessTelemetry, "POST /v1/traces": accessTelemetry,
	"GET /api/traces": accessTelemetry, "GET /api/traces/:id": accessTelemetry,
	"GET /api/traces/:id/stream": accessTelemetry, "GET /api/logs": accessTelemetry, "POST /v1/logs": accessTelemetry,
	"POST /api/otlp": accessTelemetry, "POST /api/otlp/v1/traces": accessTelemetry, "POST /api/otlp/v1/logs": accessTelemetry,
	"GET /api/traces/:id/logs": accessTelemetry, "GET /api/traces/:id/spans/:spanId/logs": accessTelemetry,

	"POST /logout": accessViewer, "GET /": accessViewer, "GET /runs": accessViewer,
	"GET /sessions": accessViewer, "GET /api/v1/sessions": accessViewer,
	"GET /runs/:id": accessViewer, "GET /runs/:id/row": accessViewer, "GET /runs/:id/sections": accessViewer,
	"GET /runs/:id/trace": accessViewer, "GET /runs/:id/conversation": accessViewer, "GET /runs/:id/ledger": accessViewer,
	"GET /runs/:id/stream": accessViewer, "GET /traces": accessViewer, "GET /traces/compare": accessViewer, "GET /traces/:trace": accessViewer,
	"GET /traces/:trace/tree": accessViewer, "GET /traces/:trace/children": accessViewer,
	"GET /traces/:trace/search": accessViewer, "GET /traces/:trace/spans/:span": accessViewer,
	"GET /traces/:trace/spans/:span/payload": accessViewer, "GET /api/v1/dashboard": accessViewer,
	"GET /runs/:a/diff/:b": accessViewer, "GET /runs/compare": accessViewer, "GET /actions": accessViewer, "GET /actions/*": accessViewer,
	"GET /inbox": accessViewer, "GET /inbox/history": accessViewer, "GET /inbox/items/:id": accessViewer,
	"POST /inbox/presence": accessViewer, "GET /inbox/:id/resolve": accessViewer, "GET /inbox/count": accessViewer,
	"GET /api/v1/runs": accessViewer, "GET /api/v1/runs/:id": accessViewer,
	"GET /api/v1/runs/:id/chunks": accessViewer, "GET /api/v1/runs/:id/lineage": accessViewer,
	"GET /api/v1/runs/:a/diff/:b": accessViewer, "GET /api/v1/interrupts": accessViewer,
	"GET /api/v1/interrupts/:id": accessViewer, "GET /api/v1/actions": accessViewer,
	"GET /api/v1/prompts/:name": accessViewer, "POST /api/v1/prompts/:name/render": accessReviewer,
	"POST /api/v1/prompts/:name/run": accessReviewer, "PUT /api/v1/prompts/:name/source": accessAdmin,
	"GET /api/actions": accessViewer, "GET /api/v1/traces": accessViewer, "GET /api/v1/traces/:id": accessViewer,
	"GET /api/v1/traces/:id/turns": accessViewer, "GET /api/v1/traces/:id/otlp": accessViewer, "GET /api/v1/traces/:id/spans/:span": accessViewer,
	"GET /ws": accessViewer,

	"POST /runs/:id/cancel": accessReviewer, "POST /runs/:id/replay": accessReviewer,
	"POST /actions/run": accessReviewer, "POST /inbox/:id/resolve": accessReviewer,
	"POST /inbox/:id/claim": accessReviewer, "POST /inbox/bulk": accessReviewer,
	"GET /inbox/bulk/:id": accessReviewer, "POST /inbox/bulk/:id/step": accessReviewer,
	"POST /api/v1/runs": accessReviewer, "POST /api/v1/runs/:id/cancel": accessReviewer,
	"POST /api/v1/runs/:id/replay": accessReviewer, "POST /api/v1/interrupts/:id/resolve": accessReviewer,
	"POST /api/runAction": accessReviewer, "POST /api/cancelAction": accessReviewer,

	"GET /users": accessAdmin, "POST /users": accessAdmin, "POST /users/:id": accessAdmin,
	"POST /users/:id/password": accessAdmin, "GET /account": accessViewer, "POST /account/password": accessViewer,

	"GET /api/v1/policy": accessViewer, "POST /api/v1/policy": accessAdmin, "POST /api/v1/policy/whatif": accessViewer,
	"GET /policy": accessViewer, "POST /policy": accessAdmin, "POST /policy/whatif": accessViewer,
	"GET /api/v1/policy/versions/:version": accessViewer, "POST /api/v1/policy/versions/:version/activate": accessAdmin,
	"POST /policy/versions/:version/activate": accessAdmin,

	"GET /api/v1/datasets": accessViewer, "POST /api/v1/datasets": accessReviewer, "GET /api/v1/datasets/:name": accessViewer,
	"POST /api/v1/datasets/:name/examples": accessReviewer, "POST /api/v1/datasets/:name/import": accessReviewer,
	"GET /api/v1/evaluators": accessViewer, "POST /api/v1/experiments": accessReviewer,
	"GET /api/v1/experiments": accessViewer, "GET /api/v1/experiments/:id": accessViewer,
	"GET /datasets": accessViewer, "POST /datasets": accessReviewer, "GET /datasets/:name": accessViewer,
	"POST /datasets/:name/examples": accessReviewer, "POST /datasets/:name/experiments": accessReviewer,
	"GET /experiments/:id": accessViewer, "GET /datasets/from-runs": accessReviewer, "POST /datasets/from-runs": accessReviewer,
}

// TestEveryRouteSaysWhoMayCallIt walks every route the server registers (with every service
// configured, outside local mode): each is in the route table with the access rule above, and
// the rule holds over HTTP: signed out, a public or telemetry route is answered and any other is
// refused as unauthenticated; a viewer's token is refused (403) on reviewer routes and a
// reviewer's on admin routes, before any handler runs.
func TestEveryRouteSaysWhoMayCallIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	hub, err := live.New(live.Config{Pool: pool})
	require.NoError(t, err)
	svc, err := runs.New(runs.Config{Workers: 0}, st, engine.NewRegistry())
	require.NoError(t, err)
	traces, err := trace.NewService(trace.Config{Store: st})
	require.NoError(t, err)
	t.Cleanup(traces.Close)
	srv, err := New(Config{Addr: "127.0.0.1:0", Version: "test", ShutdownTimeout: 5 * time.Second},
		Deps{Store: st, Runs: svc, Traces: traces, Live: hub, Experiments: experiments.New(experiments.Config{}, st, svc)})
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	b := &bundle{srv: srv, url: "http://" + srv.Addr(), store: st}

	var registered []string
	for _, r := range srv.echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		key := r.Method + " " + r.Path
		registered = append(registered, key)
		rule, ok := srv.rules[routeKey{r.Method, r.Path}]
		require.True(t, ok, "%s is registered outside the route table", key)
		want, ok := wantAccess[key]
		require.True(t, ok, "%s has no expected access in this test: decide who may call it", key)
		require.Equal(t, want.String(), rule.access.String(), key)
	}
	sort.Strings(registered)
	for key := range wantAccess {
		require.Contains(t, registered, key, "the table lost a route")
	}

	viewer := b.userToken(t, "vera", store.RoleViewer)
	reviewer := b.userToken(t, "rita", store.RoleReviewer)
	param := regexp.MustCompile(`:[a-zA-Z]+`)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path, token string) *http.Response {
		req, err := http.NewRequest(method, b.url+path, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	for _, key := range registered {
		method, path, _ := strings.Cut(key, " ")
		if path == "/api/traces/:id/stream" || path == "/ws" || path == "/static/*" {
			continue // a stream that stays open, a WebSocket upgrade, the assets (TestStaticAssets)
		}
		path = param.ReplaceAllString(path, "00000000-0000-4000-8000-000000000000")
		anon := send(method, path, "")
		switch wantAccess[key] {
		case accessPublic, accessTelemetry:
			require.NotEqual(t, http.StatusUnauthorized, anon.StatusCode, "%s is answered signed out", key)
		default:
			require.Equal(t, http.StatusUnauthorized, anon.StatusCode, "%s needs a signed-in user", key)
		}
		switch wantAccess[key] {
		case accessReviewer:
			require.Equal(t, http.StatusForbidden, send(method, path, viewer).StatusCode, "%s refuses a viewer", key)
		case accessAdmin:
			require.Equal(t, http.StatusForbidden, send(method, path, reviewer).StatusCode, "%s refuses a reviewer", key)
		case accessViewer:
			require.NotEqual(t, http.StatusForbidden, send(method, path, viewer).StatusCode, "%s lets a viewer in", key)
		}
	}
}
