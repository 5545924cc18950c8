package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/notify"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestInboxItemShowsItsWebhookDeliveries: a receiver that fails twice and then answers gets three
// attempts of one notification; the inbox item page and GET /api/v1/interrupts/{id} show each
// attempt with its status code, the failures with their error and next retry, and the receiver
// only redacted (its URL holds a token).
func TestInboxItemShowsItsWebhookDeliveries(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(rc.Close)
	const token = "XOXB-T0KEN"
	b := setup(t, opts{dev: true, runs: true, webhooks: notify.Config{URLs: []string{rc.URL + "/services/" + token},
		Secret: notify.Secret("shh-secret"), Backoff: 50 * time.Millisecond}})
	run := b.startRun(t, "/flow/transferMoney", `{"to":"ann","amount":50,"currency":"EUR"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)
	require.Eventually(t, func() bool {
		list, err := b.store.WebhookDeliveryList(t.Context(), it.ID)
		require.NoError(t, err)
		return len(list) == 3
	}, 30*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 3, n.Load())

	resp, page := get(t, b.url+"/inbox/items/"+it.ID.String())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	table := regexp.MustCompile(`(?s)<details class="webhooks" data-testid="webhook-log".*?</details>`).FindString(page)
	require.NotEmpty(t, table, "the item page shows its delivery log")
	require.Contains(t, table, "Notifications (3 attempts)")
	for i, status := range []string{"500", "503", "200"} {
		row := regexp.MustCompile(`(?s)<tr data-attempt="` + string(rune('1'+i)) + `" data-status="` + status + `".*?</tr>`).FindString(table)
		require.NotEmpty(t, row, "attempt %d answered %s", i+1, status)
		require.Contains(t, row, "interrupt.pending")
	}
	require.Contains(t, table, "the receiver answered 500 Internal Server Error")
	require.Contains(t, table, notify.Redact(rc.URL+"/x"))
	require.NotContains(t, page, token)
	require.NotContains(t, page, "shh-secret")

	resp, body := get(t, b.url+"/api/v1/interrupts/"+it.ID.String())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Deliveries []struct {
			Event       string     `json:"event"`
			Attempt     int        `json:"attempt"`
			StatusCode  *int       `json:"status_code"`
			Error       *string    `json:"error"`
			NextRetryAt *time.Time `json:"next_retry_at"`
			DeliveryKey string     `json:"delivery_key"`
		} `json:"webhook_deliveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Len(t, out.Deliveries, 3)
	for i, code := range []int{500, 503, 200} {
		d := out.Deliveries[i]
		require.Equal(t, i+1, d.Attempt)
		require.Equal(t, code, *d.StatusCode)
		require.Equal(t, code != 200, d.NextRetryAt != nil)
		require.Equal(t, code != 200, d.Error != nil)
		require.Equal(t, out.Deliveries[0].DeliveryKey, d.DeliveryKey)
	}
	require.NotContains(t, body, token)
}
