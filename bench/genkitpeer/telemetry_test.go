package genkitpeer

import (
	"context"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/tracing"
	"github.com/firebase/genkit/go/genkit"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// telemetryToolTurns is the number of tool turns agentFlow runs, as in Loupe's captured fixtures
// (internal/trace/testdata/genkit-go-1.4.0): 1 flow span + (turns+1) nested generate spans +
// (turns+1) model spans + turns tool spans = 9 spans.
const telemetryToolTurns = 2

// gkTrace and gkSpan are the parts of Genkit's TraceData that Loupe's telemetry API returns
// (GET /api/traces, GET /api/traces/{id}) that this test reads.
type gkTrace struct {
	TraceID     string             `json:"traceId"`
	DisplayName *string            `json:"displayName"`
	StartTime   *float64           `json:"startTime"`
	EndTime     *float64           `json:"endTime"`
	Spans       map[string]*gkSpan `json:"spans"`
}

type gkSpan struct {
	SpanID       string         `json:"spanId"`
	TraceID      string         `json:"traceId"`
	ParentSpanID string         `json:"parentSpanId"`
	StartTime    float64        `json:"startTime"`
	EndTime      float64        `json:"endTime"`
	DisplayName  string         `json:"displayName"`
	Attributes   map[string]any `json:"attributes"`
	Status       *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
}

// loupeTree is Loupe's own GET /api/v1/traces/{id}.
type loupeTree struct {
	Trace struct {
		TraceID     string `json:"trace_id"`
		DisplayName string `json:"display_name"`
		RootSpanID  string `json:"root_span_id"`
		StartTime   int64  `json:"start_time_unix_nano"`
		EndTime     int64  `json:"end_time_unix_nano"`
		StatusCode  int    `json:"status_code"`
		SpanCount   int    `json:"span_count"`
		Source      string `json:"source"`
	} `json:"trace"`
	Roots     []*loupeNode `json:"roots"`
	SpanCount int          `json:"span_count"`
}

type loupeNode struct {
	SpanID       string       `json:"span_id"`
	ParentSpanID *string      `json:"parent_span_id"`
	Name         string       `json:"name"`
	StatusCode   int          `json:"status_code"`
	Running      bool         `json:"running"`
	Orphan       bool         `json:"orphan"`
	Children     []*loupeNode `json:"children"`
}

// TestGenkitGoSendsTracesToLoupe runs a real Genkit Go v1.4.0 flow with GENKIT_TELEMETRY_SERVER
// pointing at a running Loupe and checks, through Loupe's Genkit telemetry API and its own JSON
// API, that every span Genkit produced was stored and links up into one tree.
//
// bench/genkit-telemetry.sh starts a throwaway Loupe and runs this test against it.
func TestGenkitGoSendsTracesToLoupe(t *testing.T) {
	base := strings.TrimRight(os.Getenv("LOUPE_URL"), "/")
	if base == "" {
		t.Skip("LOUPE_URL is not set; run bench/genkit-telemetry.sh from the repo root, which starts Loupe and runs this test against it")
	}
	ctx := context.Background()

	if body := httpGet(t, base+"/api/__health"); strings.TrimSpace(string(body)) != "OK" {
		t.Fatalf("GET /api/__health = %q, want OK", body)
	}

	// Genkit reads GENKIT_TELEMETRY_SERVER once, when it creates its global TracerProvider, and
	// then registers its HTTP telemetry exporter (a SimpleSpanProcessor: every span is POSTed when
	// it ends). The reflection server (GENKIT_ENV=dev) is not needed for that, so keep it off.
	t.Setenv("GENKIT_TELEMETRY_SERVER", base)
	t.Setenv("GENKIT_ENV", "")

	// Export errors (a failed POST, a non-200 answer) only reach OTel's global error handler.
	var (
		exportMu   sync.Mutex
		exportErrs []error
	)
	prevHandler := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		exportMu.Lock()
		exportErrs = append(exportErrs, err)
		exportMu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prevHandler) })

	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		// Another test in this process already made the provider, so Genkit will not look at
		// GENKIT_TELEMETRY_SERVER again: register the very exporter it would have.
		t.Log("global TracerProvider already exists; registering Genkit's HTTP telemetry client explicitly")
		tracing.WriteTelemetryImmediate(tracing.NewHTTPTelemetryClient(base))
	}
	tp := tracing.TracerProvider() // creates the provider and Genkit's exporter from the env var
	// An in-memory exporter alongside Genkit's records exactly what Genkit produced.
	mem := tracetest.NewInMemoryExporter()
	tp.RegisterSpanProcessor(sdktrace.NewSimpleSpanProcessor(mem))

	g := genkit.Init(ctx)
	var toolRuns atomic.Int64
	add := genkit.DefineTool(g, toolName, "Adds two integers.",
		func(_ *ai.ToolContext, in addInput) (addOutput, error) {
			toolRuns.Add(1)
			return addOutput{Sum: in.A + in.B}, nil
		})
	model := genkit.DefineModel(g, modelName,
		&ai.ModelOptions{Label: "Scripted model", Supports: &ai.ModelSupports{Multiturn: true, Tools: true}},
		scriptedToolModel(telemetryToolTurns))
	flow := genkit.DefineFlow(g, "agentFlow", func(ctx context.Context, prompt string) (string, error) {
		resp, err := genkit.Generate(ctx, g,
			ai.WithModel(model), ai.WithPrompt(prompt), ai.WithTools(add), ai.WithMaxTurns(maxTurns))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})

	var traceID string
	runCtx := tracing.WithTelemetryCallback(ctx, func(tid, _ string) {
		if traceID == "" { // the first span started is the flow's
			traceID = tid
		}
	})
	out, err := flow.Run(runCtx, "add 1 and 2, twice")
	if err != nil {
		t.Fatalf("agentFlow: %v", err)
	}
	if out != finalText || toolRuns.Load() != telemetryToolTurns {
		t.Fatalf("agentFlow returned %q after %d tool runs, want %q after %d", out, toolRuns.Load(), finalText, telemetryToolTurns)
	}
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	exportMu.Lock()
	errs := append([]error(nil), exportErrs...)
	exportMu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("Genkit failed to export %d time(s) to Loupe, first: %v", len(errs), errs[0])
	}

	// What Genkit produced for this trace.
	want := map[string]tracetest.SpanStub{}
	var rootID string
	for _, s := range mem.GetSpans() {
		if s.SpanContext.TraceID().String() != traceID {
			continue
		}
		want[s.SpanContext.SpanID().String()] = s
		if !s.Parent.IsValid() {
			rootID = s.SpanContext.SpanID().String()
		}
	}
	wantCount := 1 + 3*telemetryToolTurns + 2 // flow + generate and model per turn (+1 final) + tools
	if len(want) != wantCount || rootID == "" || want[rootID].Name != "agentFlow" {
		t.Fatalf("Genkit produced %d spans (root %q), want %d under an agentFlow root", len(want), rootID, wantCount)
	}
	t.Logf("Genkit produced trace %s: %d spans, root %s", traceID, len(want), rootID)

	// GET /api/traces/{id}: poll briefly in case Loupe's summary lags the ingest.
	var td gkTrace
	deadline := time.Now().Add(10 * time.Second)
	for {
		td = gkTrace{}
		status, body := httpDo(t, base+"/api/traces/"+traceID)
		if status == http.StatusOK {
			if err := json.Unmarshal(body, &td); err != nil {
				t.Fatalf("GET /api/traces/%s: %v\n%s", traceID, err, body)
			}
			if len(td.Spans) >= len(want) && td.DisplayName != nil && *td.DisplayName != "" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/traces/%s: status %d, %d spans after 10s, want %d\n%s", traceID, status, len(td.Spans), len(want), body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if td.TraceID != traceID {
		t.Errorf("traceId = %q, want %q", td.TraceID, traceID)
	}
	if td.DisplayName == nil || *td.DisplayName != "agentFlow" {
		t.Errorf("displayName = %v, want agentFlow", strp(td.DisplayName))
	}
	root := want[rootID]
	checkMillis(t, "trace startTime", td.StartTime, root.StartTime)
	checkMillis(t, "trace endTime", td.EndTime, root.EndTime)
	if len(td.Spans) != len(want) {
		t.Errorf("Loupe stored %d spans, Genkit produced %d", len(td.Spans), len(want))
	}
	var roots int
	for id, w := range want {
		got, ok := td.Spans[id]
		if !ok {
			t.Errorf("span %s (%s) is missing from Loupe", id, w.Name)
			continue
		}
		if got.SpanID != id || got.TraceID != traceID || got.DisplayName != w.Name {
			t.Errorf("span %s = {spanId %s traceId %s displayName %q}, want {%s %s %q}",
				id, got.SpanID, got.TraceID, got.DisplayName, id, traceID, w.Name)
		}
		wantParent := ""
		if w.Parent.IsValid() {
			wantParent = w.Parent.SpanID().String()
		}
		if got.ParentSpanID != wantParent {
			t.Errorf("span %s (%s) parentSpanId = %q, want %q", id, w.Name, got.ParentSpanID, wantParent)
		}
		if got.ParentSpanID == "" {
			roots++
		} else if _, ok := td.Spans[got.ParentSpanID]; !ok {
			t.Errorf("span %s (%s): parent %s is not in the trace", id, w.Name, got.ParentSpanID)
		}
		start, end := got.StartTime, got.EndTime
		checkMillis(t, "span "+w.Name+" startTime", &start, w.StartTime)
		checkMillis(t, "span "+w.Name+" endTime", &end, w.EndTime)
		// Loupe answers in OTLP's numbering (2 is an error); genkit:state is Genkit's own verdict.
		if got.Status == nil || got.Status.Code == 2 {
			t.Errorf("span %s (%s) status = %+v, want not an error", id, w.Name, got.Status)
		}
		if st := got.Attributes["genkit:state"]; st != "success" {
			t.Errorf("span %s (%s) genkit:state = %v, want success", id, w.Name, st)
		}
		if wa := genkitAttributes(t, w); !reflect.DeepEqual(got.Attributes, wa) {
			t.Errorf("span %s (%s) attributes differ:\n got  %v\n want %v", id, w.Name, got.Attributes, wa)
		}
	}
	if roots != 1 {
		t.Errorf("%d parentless spans, want 1", roots)
	}
	counts := map[string]int{}
	for _, s := range td.Spans {
		counts[s.DisplayName]++
	}
	t.Logf("GET /api/traces/%s: displayName %q, %d spans %v, startTime %.3f endTime %.3f",
		traceID, strp(td.DisplayName), len(td.Spans), counts, *td.StartTime, *td.EndTime)

	// GET /api/traces lists it, with its root span.
	listed := findListed(t, base, traceID)
	if listed.DisplayName == nil || *listed.DisplayName != "agentFlow" {
		t.Errorf("GET /api/traces: displayName = %v, want agentFlow", strp(listed.DisplayName))
	}
	checkMillis(t, "listed startTime", listed.StartTime, root.StartTime)
	checkMillis(t, "listed endTime", listed.EndTime, root.EndTime)
	if s, ok := listed.Spans[rootID]; !ok || s.DisplayName != "agentFlow" {
		t.Errorf("GET /api/traces: root span %s missing from the listed trace (spans %v)", rootID, keys(listed.Spans))
	}
	t.Logf("GET /api/traces lists %s as %q", traceID, strp(listed.DisplayName))

	// Loupe's own API: one tree, one root, no orphans, every span.
	var tree loupeTree
	if err := json.Unmarshal(httpGet(t, base+"/api/v1/traces/"+traceID), &tree); err != nil {
		t.Fatalf("GET /api/v1/traces/%s: %v", traceID, err)
	}
	if tree.Trace.DisplayName != "agentFlow" || tree.Trace.RootSpanID != rootID || tree.Trace.Source != "genkit" {
		t.Errorf("v1 trace = {display_name %q root_span_id %q source %q}, want {agentFlow %s genkit}",
			tree.Trace.DisplayName, tree.Trace.RootSpanID, tree.Trace.Source, rootID)
	}
	// Exactly what Genkit sent, which is the span's time to within float64's precision.
	if ws, we := wireNanos(root.StartTime), wireNanos(root.EndTime); tree.Trace.StartTime != ws || tree.Trace.EndTime != we {
		t.Errorf("v1 trace times = [%d, %d], want [%d, %d] as Genkit sent them", tree.Trace.StartTime, tree.Trace.EndTime, ws, we)
	}
	if tree.Trace.StatusCode == 2 {
		t.Errorf("v1 trace status_code = 2 (error), want not an error")
	}
	if tree.SpanCount != len(want) || tree.Trace.SpanCount != len(want) {
		t.Errorf("v1 span_count = %d (trace %d), want %d", tree.SpanCount, tree.Trace.SpanCount, len(want))
	}
	if len(tree.Roots) != 1 || tree.Roots[0].SpanID != rootID {
		t.Fatalf("v1 tree has %d roots, want exactly the agentFlow span %s", len(tree.Roots), rootID)
	}
	seen := map[string]bool{}
	var walk func(n *loupeNode, parent string, depth int)
	maxDepth := 0
	walk = func(n *loupeNode, parent string, depth int) {
		seen[n.SpanID] = true
		maxDepth = max(maxDepth, depth)
		if n.Orphan {
			t.Errorf("v1 tree: span %s (%s) is an orphan", n.SpanID, n.Name)
		}
		if n.Running {
			t.Errorf("v1 tree: span %s (%s) is still running", n.SpanID, n.Name)
		}
		if n.StatusCode == 2 {
			t.Errorf("v1 tree: span %s (%s) has an error status", n.SpanID, n.Name)
		}
		if parent != "" && (n.ParentSpanID == nil || *n.ParentSpanID != parent) {
			t.Errorf("v1 tree: span %s (%s) sits under %s but its parent_span_id is %v", n.SpanID, n.Name, parent, n.ParentSpanID)
		}
		for _, c := range n.Children {
			walk(c, n.SpanID, depth+1)
		}
	}
	walk(tree.Roots[0], "", 0)
	if len(seen) != len(want) {
		t.Errorf("v1 tree holds %d spans, want %d", len(seen), len(want))
	}
	t.Logf("GET /api/v1/traces/%s: 1 root (%s), %d spans, depth %d, no orphans", traceID, tree.Roots[0].Name, len(seen), maxDepth)
}

// scriptedToolModel returns a model that asks for the add tool until turns tool messages are in
// the conversation, then answers finalText. Like scriptedModel, it sets Response.Request.
func scriptedToolModel(turns int) ai.ModelFunc {
	return func(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
		turn := 0
		for _, m := range req.Messages {
			if m.Role == ai.RoleTool {
				turn++
			}
		}
		if turn >= turns {
			return &ai.ModelResponse{Message: ai.NewModelTextMessage(finalText), FinishReason: ai.FinishReasonStop, Request: req}, nil
		}
		return &ai.ModelResponse{
			Message: &ai.Message{Role: ai.RoleModel, Content: []*ai.Part{ai.NewToolRequestPart(&ai.ToolRequest{
				Name: toolName, Ref: "call_" + strconv.Itoa(turn+1), Input: map[string]any{"a": 1, "b": 2},
			})}},
			FinishReason: ai.FinishReasonStop,
			Request:      req,
		}, nil
	}
}

// findListed pages through GET /api/traces until it finds traceID.
func findListed(t *testing.T, base, traceID string) *gkTrace {
	t.Helper()
	token := ""
	for page := 0; page < 50; page++ {
		u := base + "/api/traces?limit=100"
		if token != "" {
			u += "&continuationToken=" + url.QueryEscape(token)
		}
		var resp struct {
			Traces            []*gkTrace `json:"traces"`
			ContinuationToken string     `json:"continuationToken"`
		}
		if err := json.Unmarshal(httpGet(t, u), &resp); err != nil {
			t.Fatalf("GET /api/traces: %v", err)
		}
		for _, tr := range resp.Traces {
			if tr.TraceID == traceID {
				return tr
			}
		}
		if resp.ContinuationToken == "" {
			break
		}
		token = resp.ContinuationToken
	}
	t.Fatalf("GET /api/traces does not list trace %s", traceID)
	return nil
}

// checkMillis checks that a Genkit millisecond time is set and equals want to the microsecond
// (Genkit Go sends nanosecond-derived fractions; Loupe keeps them exactly).
func checkMillis(t *testing.T, what string, got *float64, want time.Time) {
	t.Helper()
	if got == nil || *got <= 0 {
		t.Errorf("%s = %v, want a real time", what, got)
		return
	}
	w := float64(want.UnixNano()) / 1e6
	if d := *got - w; d > 0.001 || d < -0.001 {
		t.Errorf("%s = %.6f, want %.6f", what, *got, w)
	}
}

// genkitAttributes is a span's attributes as Genkit's exporter sends them (Value.AsInterface),
// after a JSON round trip.
func genkitAttributes(t *testing.T, s tracetest.SpanStub) map[string]any {
	t.Helper()
	m := map[string]any{}
	for _, a := range s.Attributes {
		m[string(a.Key)] = a.Value.AsInterface()
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// wireNanos is the time Genkit Go puts on the wire, in nanoseconds: it sends
// float64(UnixNano)/1e6 milliseconds (tracing.ToMilliseconds), which encoding/json writes as the
// shortest decimal; Loupe parses that decimal exactly, to the nearest nanosecond.
func wireNanos(t time.Time) int64 {
	ms := float64(t.UnixNano()) / 1e6
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(ms, 'f', -1, 64))
	if !ok {
		panic("unparsable float")
	}
	r.Mul(r, big.NewRat(1e6, 1))
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Mul(rem, big.NewInt(2)).CmpAbs(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func httpDo(t *testing.T, u string) (int, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, body
}

func httpGet(t *testing.T, u string) []byte {
	t.Helper()
	status, body := httpDo(t, u)
	if status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", u, status, body)
	}
	return body
}

func strp(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
