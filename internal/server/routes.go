package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/static"
)

// access is who may call a route. Every route says its own (routeTable); the middlewares that
// authenticate, check CSRF, limit bodies and compress read it from the matched route, so a new
// route is never public, or uncompressed, without saying so.
type access uint8

const (
	// accessPublic needs no sign-in: health, metrics, assets, signing in, and the genkit CLI's
	// /api/notify (which changes nothing).
	accessPublic access = iota + 1
	// accessTelemetry is other programs' traces (OTLP and Genkit ingest) and Genkit's trace and log
	// reads. Ingest (POST /api/traces, POST /v1/traces) needs no credentials while the server is
	// bound to a loopback address, like Genkit's own telemetry server; bound anywhere else, it
	// needs "Authorization: Bearer $LOUPE_INGEST_TOKEN" (or a user's API token), and is refused
	// outright when no token is set. Genkit's reads follow the same rule, and also take a
	// signed-in user's session, so that traces never leave a non-loopback server without
	// credentials. Their handlers check this, so the sign-in check lets them through. Ingest is not
	// cookie-authenticated, so CSRF tokens do not apply (cross-site browser requests are refused
	// instead), and it enforces its own body limit, answering OTLP clients in OTLP's shape.
	accessTelemetry
	// accessViewer needs a signed-in user of any role.
	accessViewer
	// accessReviewer needs the reviewer role or above.
	accessReviewer
	// accessAdmin needs the admin role.
	accessAdmin
)

func (a access) String() string {
	switch a {
	case accessPublic:
		return "public"
	case accessTelemetry:
		return "telemetry"
	case accessViewer:
		return "viewer"
	case accessReviewer:
		return "reviewer"
	case accessAdmin:
		return "admin"
	}
	return "unknown"
}

// route is one entry of the route table.
type route struct {
	method, path string
	handler      echo.HandlerFunc
	access       access
	// raw: the handler writes its response as it comes (a stream, a WebSocket) or compresses it
	// itself, or it answers a few bytes thousands of times a second (ingest): no gzip middleware.
	raw bool
	// quiet: no request log line (probes and assets).
	quiet bool
}

// routeTable is every route of the server, with its access rule. Routes whose service is not
// configured (no run service, no trace service, no live hub) are left out.
func (s *Server) routeTable() []route {
	get := func(path string, h echo.HandlerFunc, a access) route {
		return route{method: http.MethodGet, path: path, handler: h, access: a}
	}
	post := func(path string, h echo.HandlerFunc, a access) route {
		return route{method: http.MethodPost, path: path, handler: h, access: a}
	}
	raw := func(r route) route { r.raw = true; return r }
	quiet := func(r route) route { r.quiet = true; return r }

	rt := []route{
		quiet(get("/healthz", s.healthz, accessPublic)),
		get("/readyz", s.readyz, accessPublic),
		quiet(raw(get("/metrics", echo.WrapHandler(s.metrics.handler()), accessPublic))),
		quiet(get(static.Prefix+"*", echo.WrapHandler(static.Handler()), accessPublic)),
		get("/login", s.loginPage, accessPublic),
		post("/login", s.login, accessPublic),
		post("/logout", s.logout, accessViewer),

		// Pages and their fragments.
		get("/", s.dashboard, accessViewer),
		get("/runs", s.runsPage, accessViewer),
		get("/sessions", s.sessionsPage, accessViewer),
		get("/runs/:id", s.runPage, accessViewer),
		get("/runs/:id/row", s.runRow, accessViewer),
		get("/runs/:id/sections", s.runSections, accessViewer),
		get("/runs/:id/trace", s.runTraceFragment, accessViewer),
		// A page of the run page's long lists (pages_run_lists.go).
		get("/runs/:id/conversation", s.runConversationFragment, accessViewer),
		get("/runs/:id/ledger", s.runLedgerFragment, accessViewer),
		get("/runs/:id/stream", s.runStreamFragment, accessViewer),
		get("/traces", s.tracesPage, accessViewer),
		get("/traces/compare", s.traceCompare, accessViewer),
		get("/traces/:trace", s.tracePage, accessViewer),
		get("/traces/:trace/tree", s.traceTree, accessViewer),
		get("/traces/:trace/children", s.traceChildren, accessViewer),
		get("/traces/:trace/search", s.traceSearch, accessViewer),
		get("/traces/:trace/spans/:span", s.traceSpan, accessViewer),
		get("/traces/:trace/spans/:span/payload", s.traceSpanPayload, accessViewer),
		get("/users", s.usersPage, accessAdmin),
		post("/users", s.userCreate, accessAdmin),
		post("/users/:id", s.userUpdate, accessAdmin),
		post("/users/:id/password", s.userResetPassword, accessAdmin),
		get("/account", s.accountPage, accessViewer),
		post("/account/password", s.accountPassword, accessViewer),

		get("/api/v1/dashboard", s.apiDashboard, accessViewer),
		get("/api/v1/sessions", s.apiSessionList, accessViewer),
	}
	if s.deps.Runs != nil {
		rt = append(rt,
			post("/runs/:id/cancel", s.runCancelForm, accessReviewer),
			post("/runs/:id/replay", s.runReplayForm, accessReviewer),
			get("/runs/:a/diff/:b", s.diffPage, accessViewer),
			get("/runs/compare", s.runsCompare, accessViewer),
			get("/actions", s.actionsPage, accessViewer),
			// An action's page: /actions/flow/travelAgent, /actions/app:/tool/x (actionURL).
			get("/actions/*", s.actionPage, accessViewer),
			post("/actions/run", s.actionRun, accessReviewer),

			// The inbox (pages_inbox.go).
			get("/inbox", s.inboxPage, accessViewer),
			get("/inbox/history", s.inboxHistoryPage, accessViewer),
			get("/inbox/items/:id", s.inboxItem, accessViewer),
			post("/inbox/:id/resolve", s.inboxResolve, accessReviewer),
			post("/inbox/:id/claim", s.inboxClaim, accessReviewer),
			post("/inbox/bulk", s.inboxBulk, accessReviewer),
			get("/inbox/bulk/:id", s.inboxBulkPage, accessReviewer),
			post("/inbox/bulk/:id/step", s.inboxBulkStep, accessReviewer),
			get("/inbox/count", s.inboxCount, accessViewer),
			post("/inbox/presence", s.inboxPresenceUpdate, accessViewer),
			// The address a refused form leaves behind without JS: reloading it shows the item.
			get("/inbox/:id/resolve", s.inboxResolveRedirect, accessViewer),

			// The runs, interrupts and actions API (runs_api.go, replay_api.go).
			post("/api/v1/runs", s.apiRunStart, accessReviewer),
			get("/api/v1/runs", s.apiRunList, accessViewer),
			get("/api/v1/runs/:id", s.apiRunGet, accessViewer),
			get("/api/v1/runs/:id/chunks", s.apiRunChunks, accessViewer),
			post("/api/v1/runs/:id/cancel", s.apiRunCancel, accessReviewer),
			post("/api/v1/runs/:id/replay", s.apiRunReplay, accessReviewer),
			get("/api/v1/runs/:id/lineage", s.apiRunLineage, accessViewer),
			get("/api/v1/runs/:a/diff/:b", s.apiRunDiff, accessViewer),
			get("/api/v1/interrupts", s.apiInterruptList, accessViewer),
			get("/api/v1/interrupts/:id", s.apiInterruptGet, accessViewer),
			post("/api/v1/interrupts/:id/resolve", s.apiInterruptResolve, accessReviewer),
			get("/api/v1/actions", s.apiActionList, accessViewer),

			// The prompt playground (prompts_api.go); a name in a subdirectory is "sub%2Fname".
			get("/api/v1/prompts/:name", s.apiPromptGet, accessViewer),
			post("/api/v1/prompts/:name/render", s.apiPromptRender, accessReviewer),
			raw(post("/api/v1/prompts/:name/run", s.apiPromptRun, accessReviewer)),
			route{method: http.MethodPut, path: "/api/v1/prompts/:name/source", handler: s.apiPromptSave, access: accessAdmin},

			// Approval policies (policy_api.go, pages_policy.go).
			get("/api/v1/policy", s.apiPolicyGet, accessViewer),
			post("/api/v1/policy", s.apiPolicySave, accessAdmin),
			post("/api/v1/policy/whatif", s.apiPolicyWhatIf, accessViewer),
			get("/api/v1/policy/versions/:version", s.apiPolicyVersionGet, accessViewer),
			post("/api/v1/policy/versions/:version/activate", s.apiPolicyActivate, accessAdmin),
			get("/policy", s.policyPage, accessViewer),
			post("/policy", s.policySaveForm, accessAdmin),
			post("/policy/versions/:version/activate", s.policyActivateForm, accessAdmin),
			post("/policy/whatif", s.policyWhatIfForm, accessViewer),

			// Genkit's reflection API (genkit_reflection.go).
			get("/api/actions", s.genkitActions, accessViewer),
			raw(post("/api/runAction", s.genkitRunAction, accessReviewer)),
			post("/api/cancelAction", s.genkitCancelAction, accessReviewer),
			post("/api/notify", s.genkitNotify, accessPublic),
		)
	}
	if s.deps.Runs != nil && s.deps.Experiments != nil {
		rt = append(rt,
			// Datasets and experiments (experiments_api.go, pages_experiments.go).
			get("/api/v1/datasets", s.apiDatasetList, accessViewer),
			post("/api/v1/datasets", s.apiDatasetCreate, accessReviewer),
			get("/api/v1/datasets/:name", s.apiDatasetGet, accessViewer),
			post("/api/v1/datasets/:name/examples", s.apiDatasetChange, accessReviewer),
			post("/api/v1/datasets/:name/import", s.apiDatasetImport, accessReviewer),
			get("/api/v1/evaluators", s.apiEvaluatorList, accessViewer),
			post("/api/v1/experiments", s.apiExperimentStart, accessReviewer),
			get("/api/v1/experiments", s.apiExperimentList, accessViewer),
			get("/api/v1/experiments/:id", s.apiExperimentGet, accessViewer),
			get("/datasets", s.datasetsPage, accessViewer),
			post("/datasets", s.datasetCreateForm, accessReviewer),
			get("/datasets/from-runs", s.datasetFromRunsPage, accessReviewer),
			post("/datasets/from-runs", s.datasetFromRunsForm, accessReviewer),
			get("/datasets/:name", s.datasetPage, accessViewer),
			post("/datasets/:name/examples", s.datasetExamplesForm, accessReviewer),
			post("/datasets/:name/experiments", s.datasetExperimentForm, accessReviewer),
			get("/experiments/:id", s.experimentPage, accessViewer),
		)
	}
	if s.deps.Traces != nil {
		rt = append(rt,
			// Genkit's telemetry API (genkit_telemetry.go) and OTLP ingest (traces.go).
			get("/api/__health", func(c echo.Context) error { return c.String(http.StatusOK, "OK") }, accessPublic),
			raw(post("/api/traces", s.genkitTraceIngest, accessTelemetry)),
			get("/api/traces", s.genkitTraceList, accessTelemetry),
			get("/api/traces/:id", s.genkitTraceGet, accessTelemetry),
			raw(get("/api/traces/:id/stream", s.genkitTraceStream, accessTelemetry)),
			get("/api/logs", s.genkitLogs, accessTelemetry),
			get("/api/traces/:id/logs", s.genkitLogs, accessTelemetry),
			get("/api/traces/:id/spans/:spanId/logs", s.genkitLogs, accessTelemetry),
			raw(post("/v1/traces", s.otlpTraceIngest, accessTelemetry)),
			raw(post("/v1/logs", s.otlpLogIngest, accessTelemetry)),
			// Genkit's own OTLP/JSON route, where Genkit JS sends its logs.
			raw(post("/api/otlp", s.genkitOTLPIngest, accessTelemetry)),
			raw(post("/api/otlp/v1/traces", s.genkitOTLPIngest, accessTelemetry)),
			raw(post("/api/otlp/v1/logs", s.genkitOTLPIngest, accessTelemetry)),

			// Loupe's traces API (traces.go); a trace's stored JSON is compressed by its handler,
			// at a level for its size (writeTraceJSON).
			get("/api/v1/traces", s.apiTraceList, accessViewer),
			raw(get("/api/v1/traces/:id", s.apiTraceGet, accessViewer)),
			get("/api/v1/traces/:id/turns", s.apiTraceTurns, accessViewer),
			raw(get("/api/v1/traces/:id/otlp", s.apiTraceOTLP, accessViewer)),
			raw(get("/api/v1/traces/:id/spans/:span", s.apiTraceSpan, accessViewer)),
		)
	}
	if s.deps.Live != nil {
		rt = append(rt, raw(get("/ws", s.liveSocket, accessViewer)))
	}
	return rt
}

// register adds the route table to the echo instance, each route with the role check its access
// asks for, and keeps the table for the middlewares (ruleOf).
func (s *Server) register(rt []route) {
	s.rules = make(map[routeKey]route, len(rt))
	for _, r := range rt {
		var mw []echo.MiddlewareFunc
		switch r.access {
		case accessReviewer:
			mw = append(mw, requireRole(store.RoleReviewer))
		case accessAdmin:
			mw = append(mw, requireRole(store.RoleAdmin))
		}
		s.echo.Add(r.method, r.path, r.handler, mw...)
		s.rules[routeKey{r.method, r.path}] = r
	}
}

// routeKey is a route's method and path pattern, as echo matched it.
type routeKey struct{ method, path string }

// ruleOf is the matched route's entry of the table; a request that matched no route (a 404) is
// treated as a viewer's, so that what is not there is not shown to anyone signed out.
// Several middlewares ask, on every request.
func (s *Server) ruleOf(c echo.Context) route {
	if r, ok := s.rules[routeKey{c.Request().Method, c.Path()}]; ok {
		return r
	}
	return route{access: accessViewer}
}
