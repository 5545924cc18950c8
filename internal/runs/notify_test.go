package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/notify"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

const hookSecret = "s3cret-hmac-key-never-logged"

// hookRequest is one delivery a receiver got.
type hookRequest struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is a webhook receiver on loopback. answer decides the reply to the n-th request (from
// 1); it may block on the request's context.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []hookRequest
	seen chan struct{}
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{seen: make(chan struct{}, 100)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, hookRequest{header: r.Header.Clone(), body: body, at: time.Now()})
		n := len(rc.got)
		rc.mu.Unlock()
		rc.seen <- struct{}{}
		if answer != nil {
			answer(n, w, r)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// requests waits until the receiver got n requests, and returns them.
func (rc *receiver) requests(t *testing.T, n int) []hookRequest {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		rc.mu.Lock()
		if len(rc.got) >= n {
			out := append([]hookRequest(nil), rc.got...)
			rc.mu.Unlock()
			return out
		}
		rc.mu.Unlock()
		select {
		case <-rc.seen:
		case <-timeout:
			t.Fatalf("the receiver got fewer than %d requests in 60s", n)
		}
	}
}

// syncBuf is a log sink safe for the service's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// hookService replaces b's service by one that posts webhooks to urls (fast backoff, short
// timeout) and logs, River's log with it, into the returned buffer at debug level.
func (b *bundle) hookService(t *testing.T, timeout time.Duration, urls ...string) *syncBuf {
	t.Helper()
	logs := &syncBuf{}
	reg := engine.NewRegistry()
	defineTestAgent(reg, b.pool, "", "")
	cfg := runs.Config{Workers: 2, LeaseTTL: time.Second,
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Webhooks: notify.Config{URLs: urls, Secret: notify.Secret(hookSecret), Timeout: timeout, Backoff: 50 * time.Millisecond, BaseURL: "http://loupe.test"}}
	b.svc.Stop()
	svc, err := runs.New(cfg, b.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	b.svc = svc
	return logs
}

// decodeHook checks a delivery's signature as a receiver must, and decodes its body.
func decodeHook(t *testing.T, r hookRequest) notify.Payload {
	t.Helper()
	require.NoError(t, notify.Verify([]byte(hookSecret), r.header.Get(notify.SignatureHeader), r.header.Get(notify.TimestampHeader),
		r.body, time.Now(), 5*time.Minute))
	var p notify.Payload
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.Equal(t, p.ID, r.header.Get(notify.IdempotencyHeader))
	require.Equal(t, p.Event, r.header.Get(notify.EventHeader))
	return p
}

// deliveries waits for the interrupt's delivery log to hold n attempts, and returns it.
func (b *bundle) deliveries(t *testing.T, it *store.Interrupt, n int) []*store.WebhookDelivery {
	t.Helper()
	var list []*store.WebhookDelivery
	require.Eventually(t, func() bool {
		var err error
		list, err = b.store.WebhookDeliveryList(context.Background(), it.ID)
		require.NoError(t, err)
		return len(list) >= n
	}, 60*time.Second, 20*time.Millisecond)
	return list
}

func TestANewPendingInterruptPostsASignedWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	rc := newReceiver(t, nil)
	b.hookService(t, 0, rc.srv.URL+"/hooks/loupe")
	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "bob"})
	it := b.waitPending(t, run.ID)

	p := decodeHook(t, rc.requests(t, 1)[0])
	require.Equal(t, notify.EventPending, p.Event)
	require.Equal(t, it.ID.String(), p.Interrupt.ID)
	require.Equal(t, run.ID.String(), p.Interrupt.RunID)
	require.Equal(t, "/flow/policyAgent", p.Interrupt.Action)
	require.Equal(t, "transfer", p.Interrupt.Tool)
	require.Equal(t, store.InterruptPending, p.Interrupt.Status)
	require.Equal(t, "Send 5 to bob?", p.Interrupt.Message)
	require.Equal(t, "http://loupe.test/inbox/items/"+it.ID.String(), p.Interrupt.URL)
	require.Contains(t, p.Text, "*transfer* in /flow/policyAgent waits for a reviewer")
	require.Contains(t, p.Text, "<http://loupe.test/inbox/items/"+it.ID.String()+"|Open it in the inbox>")

	// A body altered on the way, or one played again later, does not verify.
	r := rc.requests(t, 1)[0]
	sig, ts := r.header.Get(notify.SignatureHeader), r.header.Get(notify.TimestampHeader)
	require.ErrorIs(t, notify.Verify([]byte(hookSecret), sig, ts, bytes.Replace(r.body, []byte("bob"), []byte("eve"), 1), time.Now(), 5*time.Minute), notify.ErrBadSignature)
	require.ErrorIs(t, notify.Verify([]byte(hookSecret), sig, ts, r.body, time.Now().Add(time.Hour), 5*time.Minute), notify.ErrBadSignature)

	log := b.deliveries(t, it, 1)
	require.Len(t, log, 1)
	require.Equal(t, 200, *log[0].StatusCode)
	require.Nil(t, log[0].Error)
	require.Nil(t, log[0].NextRetryAt)
	require.Equal(t, p.ID, log[0].DeliveryKey)
}

func TestAWebhookThatFailsTwiceIsTriedThreeTimesAndLogged(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	b.hookService(t, 0, rc.srv.URL)
	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "bob"})
	it := b.waitPending(t, run.ID)

	got := rc.requests(t, 3)
	log := b.deliveries(t, it, 3)
	require.Len(t, log, 3)
	for i, want := range []int{500, 503, 200} {
		require.Equal(t, i+1, log[i].Attempt)
		require.Equal(t, want, *log[i].StatusCode)
		require.Equal(t, log[0].DeliveryKey, log[i].DeliveryKey, "one notification, one idempotency key")
		require.Equal(t, log[0].DeliveryKey, got[i].header.Get(notify.IdempotencyHeader))
		decodeHook(t, got[i])
	}
	require.Contains(t, *log[0].Error, "500 Internal Server Error")
	require.NotNil(t, log[0].NextRetryAt)
	require.NotNil(t, log[1].NextRetryAt)
	require.Nil(t, log[2].NextRetryAt)
	require.Nil(t, log[2].Error)
	// The backoff doubles: 50 ms, then 100 ms (each plus up to a tenth), counted from each
	// attempt, and no attempt comes before the retry time the one before it set. (The log's
	// times, not the receiver's: a loaded machine may hold a taken job a while before it posts.)
	require.GreaterOrEqual(t, log[0].NextRetryAt.Sub(log[0].AttemptedAt), 49*time.Millisecond) // stored to the microsecond
	require.Less(t, log[0].NextRetryAt.Sub(log[0].AttemptedAt), 56*time.Millisecond)
	require.GreaterOrEqual(t, log[1].NextRetryAt.Sub(log[1].AttemptedAt), 99*time.Millisecond)
	require.Less(t, log[1].NextRetryAt.Sub(log[1].AttemptedAt), 111*time.Millisecond)
	require.False(t, log[1].AttemptedAt.Before(*log[0].NextRetryAt), "attempt 2 waited for its retry time")
	require.False(t, log[2].AttemptedAt.Before(*log[1].NextRetryAt), "attempt 3 waited for its retry time")
	require.Len(t, rc.requests(t, 3), 3)
}

func TestAPolicyThatApprovesSendsNoPendingWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	rc := newReceiver(t, nil)
	b.hookService(t, 0, rc.srv.URL)
	b.savePolicy(t, transferPolicy)
	approved := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "bob"})
	b.wait(t, approved.ID, store.RunSucceeded)
	// A transfer the policy leaves to a person is the only one notified.
	asked := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 500, "to": "bob"})
	it := b.waitPending(t, asked.ID)
	p := decodeHook(t, rc.requests(t, 1)[0])
	require.Equal(t, it.ID.String(), p.Interrupt.ID)
	b.deliveries(t, it, 1)
	var jobs int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'loupe.webhook'`).Scan(&jobs))
	require.Equal(t, 1, jobs)
	require.Len(t, rc.requests(t, 1), 1)
}

func TestAnExpiredInterruptSendsOneExpiryWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	rc := newReceiver(t, nil)
	b.hookService(t, 0, rc.srv.URL)
	v := b.savePolicy(t, `
rules:
  - name: quick
    tool: transfer
    decide: ask
    expires: 1s
`)
	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "bob"})
	b.wait(t, run.ID, store.RunSucceeded)
	got := rc.requests(t, 2)
	pending, expired := decodeHook(t, got[0]), decodeHook(t, got[1])
	require.Equal(t, notify.EventPending, pending.Event)
	require.Equal(t, "quick", pending.Interrupt.Rule)
	require.NotNil(t, pending.Interrupt.ExpiresAt)
	require.Equal(t, notify.EventExpired, expired.Event)
	require.Equal(t, store.InterruptDenied, expired.Interrupt.Status)
	require.Equal(t, "policy quick v"+itoa(v.Version), expired.Interrupt.ResolvedBy)
	require.Contains(t, expired.Text, "nobody decided in time, so it was denied by policy quick")
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = 'loupe.webhook' AND args->>'event' = 'interrupt.expired'`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestAHangingReceiverIsCutByTheTimeoutAndRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	rc := newReceiver(t, func(n int, _ http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done() // hangs until Loupe gives up on it
		}
	})
	b.hookService(t, 300*time.Millisecond, rc.srv.URL)
	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "bob"})
	it := b.waitPending(t, run.ID)
	got := rc.requests(t, 2)
	log := b.deliveries(t, it, 2)
	require.Nil(t, log[0].StatusCode)
	require.Contains(t, *log[0].Error, "no answer within 300ms")
	require.GreaterOrEqual(t, log[0].DurationMS, 300)
	require.Less(t, log[0].DurationMS, 5000)
	require.NotNil(t, log[0].NextRetryAt)
	require.Equal(t, 200, *log[1].StatusCode)
	require.Equal(t, decodeHook(t, got[0]).ID, decodeHook(t, got[1]).ID)
}

func TestTheWebhookSecretAndURLTokenNeverAppearInLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	const token = "T0KEN-in-the-url"
	// A receiver that refuses to connect logs the transport's error too.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/services/" + token + "?key=" + token
	dead.Close()
	logs := b.hookService(t, 0, rc.srv.URL+"/services/"+token+"?key="+token, deadURL)
	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "bob"})
	it := b.waitPending(t, run.ID)
	rc.requests(t, 2)
	require.Eventually(t, func() bool {
		list, err := b.store.WebhookDeliveryList(context.Background(), it.ID)
		require.NoError(t, err)
		refused := 0
		for _, d := range list {
			if d.Error != nil && strings.Contains(*d.Error, "refused") {
				refused++
			}
		}
		return len(list) >= 4 && refused >= 2
	}, 60*time.Second, 20*time.Millisecond)
	// The receiver has answered its second request, and the dead one was refused twice, but the
	// delivery's own log line may still be on its way (make stress saw it so).
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "webhook delivered") },
		60*time.Second, 20*time.Millisecond, "the accepted delivery is logged")

	out := logs.String()
	require.Contains(t, out, "webhook delivery failed")
	require.Contains(t, out, strings.TrimPrefix(rc.srv.URL, "http://")+"/…")
	require.NotContains(t, out, hookSecret)
	require.NotContains(t, out, token)
	// Nor the queue or the delivery log: the jobs name each receiver by its id only.
	var args string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT coalesce(string_agg(args::text || coalesce(errors::text, ''), ' '), '') FROM river_job WHERE kind = 'loupe.webhook'`).Scan(&args))
	require.NotContains(t, args, token)
	require.NotContains(t, args, hookSecret)
	list, err := b.store.WebhookDeliveryList(context.Background(), it.ID)
	require.NoError(t, err)
	raw, _ := json.Marshal(list)
	require.NotContains(t, string(raw), token)
}

func TestAnEscalationIsNotifiedWhenItsTransactionCommits(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	rc := newReceiver(t, nil)
	b.hookService(t, 0, rc.srv.URL)
	run := b.startPolicyAgent(t, "transfer", map[string]any{"amount": 5, "to": "bob"})
	it := b.waitPending(t, run.ID)
	rc.requests(t, 1)
	ctx := context.Background()
	r, err := b.store.RunGet(ctx, run.ID)
	require.NoError(t, err)
	// Rolled back: nothing is sent.
	rollback := errors.New("rollback")
	require.ErrorIs(t, b.store.WithTx(ctx, func(tx *store.Store) error {
		require.NoError(t, b.svc.Notify(ctx, tx, r, it, runs.NotifyEvent{Event: notify.EventEscalated, EscalatedTo: "role:nobody"}))
		return rollback
	}), rollback)
	require.NoError(t, b.store.WithTx(ctx, func(tx *store.Store) error {
		return b.svc.Notify(ctx, tx, r, it, runs.NotifyEvent{Event: notify.EventEscalated, EscalatedTo: "role:finance"})
	}))
	p := decodeHook(t, rc.requests(t, 2)[1])
	require.Equal(t, notify.EventEscalated, p.Event)
	require.Equal(t, "role:finance", p.Interrupt.EscalatedTo)
	require.Contains(t, p.Text, "was escalated to role:finance")
	b.deliveries(t, it, 2)
	require.Len(t, rc.requests(t, 2), 2)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
