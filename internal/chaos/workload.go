package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// input is one distinct run the workload starts, again and again: every run of it must end as
// its clean run did.
type input struct {
	action     string
	input      map[string]any
	interrupts bool // it stops for a reviewer (transferMoney, travelAgent)
}

// inputs is the workload's mix: transfers and bookings that wait for a reviewer, research runs
// with six parallel searches per turn, and streaming countdowns.
var inputs = []input{
	{"/flow/transferMoney", map[string]any{"to": "alice", "amount": 120, "currency": "EUR"}, true},
	{"/flow/transferMoney", map[string]any{"to": "bob", "amount": 500, "currency": "CNY"}, true},
	{"/flow/transferMoney", map[string]any{"to": "carol", "amount": 42.5, "currency": "USD"}, true},
	{"/flow/travelAgent", map[string]any{"destination": "Lisbon"}, true},
	{"/flow/travelAgent", map[string]any{"destination": "Kyoto"}, true},
	{"/flow/travelAgent", map[string]any{"destination": "Reykjavik"}, true},
	{"/flow/researchAgent", map[string]any{"topic": "durable execution", "depth": 3}, false},
	{"/flow/researchAgent", map[string]any{"topic": "fencing tokens", "depth": 5}, false},
	{"/flow/countdown", map[string]any{"from": 5}, false},
	{"/flow/countdown", map[string]any{"from": 15}, false},
}

// A run's plan is what the reviewer does with its interrupts.
const (
	planApprove = "approve"
	planDeny    = "deny"
	planLeave   = "leave" // never resolved: the run must stay interrupted with a pending interrupt
)

// denyComment is the reason every denial gives; it reaches the model, so it must not vary.
const denyComment = "chaos harness: denied"

// workload starts runs and reviews their interrupts through the JSON API, tolerating the
// serve's deaths: a request that fails is tried again later.
type workload struct {
	api    string
	client *http.Client

	mu      sync.Mutex
	plans   map[string]string // run id → plan; runs the harness did not see start are approved
	counts  workloadCounts
	reviews atomic.Bool
	acks    *acknowledged
}

func newWorkload(api string) *workload {
	return &workload{api: api, client: &http.Client{Timeout: 10 * time.Second}, plans: map[string]string{}, acks: &acknowledged{}}
}

// pickPlan chooses what the reviewer will do with a run's interrupts.
func pickPlan(rng *rand.Rand, in input) string {
	if !in.interrupts {
		return planApprove
	}
	switch n := rng.IntN(100); {
	case n < 10:
		return planLeave
	case n < 30:
		return planDeny
	}
	return planApprove
}

// inputJSON is in's input as the API receives it.
func inputJSON(in input) []byte {
	b, _ := json.Marshal(in.input)
	return b
}

// start starts a run, trying again while the serve is down, for up to a minute. A request whose
// answer was lost may have started a run all the same; the checks find it in the database.
func (w *workload) start(ctx context.Context, in input, plan string) (string, error) {
	body, _ := json.Marshal(map[string]any{"action": in.action, "input": in.input})
	deadline := time.Now().Add(time.Minute)
	for {
		var run struct {
			ID string `json:"id"`
		}
		status, err := w.post(ctx, "/api/v1/runs", body, &run)
		if err == nil && status == http.StatusCreated {
			w.acks.addRun(ackedRun{ID: run.ID, Action: in.action, Input: inputJSON(in)})
			w.mu.Lock()
			w.plans[run.ID] = plan
			w.counts.started++
			w.mu.Unlock()
			return run.ID, nil
		}
		if err == nil && status < 500 {
			return "", fmt.Errorf("start %s: HTTP %d", in.action, status)
		}
		w.mu.Lock()
		w.counts.startRetries++
		w.mu.Unlock()
		if time.Now().After(deadline) {
			return "", fmt.Errorf("start %s: the API did not answer for a minute (last: %d %v)", in.action, status, err)
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return "", ctx.Err()
		}
	}
}

// review resolves pending interrupts as their runs' plans say, while w.reviews is set, until ctx
// ends.
func (w *workload) review(ctx context.Context) {
	for sleepCtx(ctx, 150*time.Millisecond) {
		if !w.reviews.Load() {
			continue
		}
		pending, err := w.pending(ctx)
		if err != nil {
			continue // the serve is down, or restarting
		}
		for _, it := range pending {
			if !w.reviews.Load() || ctx.Err() != nil {
				break
			}
			w.resolve(ctx, it.ID, w.planOf(it.RunID))
		}
	}
}

func (w *workload) planOf(runID string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.plans[runID]; ok {
		return p
	}
	return planApprove
}

type pendingInterrupt struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
}

func (w *workload) pending(ctx context.Context) ([]pendingInterrupt, error) {
	var out []pendingInterrupt
	cursor := ""
	for {
		var page struct {
			Interrupts []pendingInterrupt `json:"interrupts"`
			NextCursor *string            `json:"next_cursor"`
		}
		path := "/api/v1/interrupts?status=pending&limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if err := w.get(ctx, path, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Interrupts...)
		if page.NextCursor == nil {
			return out, nil
		}
		cursor = *page.NextCursor
	}
}

func (w *workload) resolve(ctx context.Context, id, plan string) {
	req := map[string]any{"action": "approve"}
	switch plan {
	case planLeave:
		return
	case planDeny:
		req = map[string]any{"action": "deny", "comment": denyComment}
	}
	body, _ := json.Marshal(req)
	var it struct {
		ID         string     `json:"id"`
		RunID      string     `json:"run_id"`
		Turn       int        `json:"turn"`
		Ref        string     `json:"ref"`
		Status     string     `json:"status"`
		Version    int64      `json:"version"`
		ResolvedAt *time.Time `json:"resolved_at"`
	}
	status, err := w.post(ctx, "/api/v1/interrupts/"+id+"/resolve", body, &it)
	if err == nil && status == http.StatusOK {
		d := ackedDecision{Interrupt: id, Run: it.RunID, Turn: it.Turn, Ref: it.Ref, Status: it.Status, Version: it.Version}
		if it.ResolvedAt != nil {
			d.ResolvedAt = *it.ResolvedAt
		}
		w.acks.addDecision(d)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil || status >= 500:
		w.counts.resolveErrors++ // tried again on the next pass, if it is still pending
	case status == http.StatusConflict:
		w.counts.conflicts++ // resolved by an earlier request whose answer was lost
	case status == http.StatusOK && plan == planDeny:
		w.counts.denied++
	case status == http.StatusOK:
		w.counts.approved++
	default:
		w.counts.resolveErrors++
	}
}

func (w *workload) snapshot() workloadCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts
}

func (w *workload) post(ctx context.Context, path string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.api+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	return w.do(req, out)
}

func (w *workload) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.api+path, nil)
	if err != nil {
		return err
	}
	status, err := w.do(req, out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s: HTTP %d", path, status)
	}
	return err
}

func (w *workload) do(req *http.Request, out any) (int, error) {
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
		}
	}
	return resp.StatusCode, nil
}

// waitReady polls the serve's /readyz until it answers 200.
func (w *workload) waitReady(ctx context.Context, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.api+"/readyz", nil)
		if status, err := w.do(req, nil); err == nil && status == http.StatusOK {
			return nil
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	return errors.New("the serve was not ready in time")
}
