package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRedactKeepsOnlySchemeAndHost(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://hooks.slack.com/…", Redact("https://hooks.slack.com/services/T0/B0/XYZ"))
	require.Equal(t, "https://example.com/…", Redact("https://user:pw@example.com/?token=abc"))
	require.Equal(t, "http://127.0.0.1:9", Redact("http://127.0.0.1:9"))
	require.Equal(t, "[a webhook URL]", Redact("not a url"))
}

func TestASecretNeverPrints(t *testing.T) {
	t.Parallel()
	s := Secret("hunter2")
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "secret", s, "cfg", Config{Secret: s, URLs: []string{"https://h/hunter2"}})
	js, err := json.Marshal(Config{Secret: s})
	require.NoError(t, err)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %s %q %#v %+v", s, s, s, s, Config{Secret: s}), logs.String(), string(js)} {
		require.NotContains(t, out, "hunter2")
	}
}

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"text":"hi"}`)
	now := time.Unix(1_700_000_000, 0)
	ts := "1700000000"
	sig := Sign([]byte("k"), ts, body)
	require.Regexp(t, `^sha256=[0-9a-f]{64}$`, sig)
	require.NoError(t, Verify([]byte("k"), sig, ts, body, now.Add(time.Minute), 5*time.Minute))
	require.ErrorIs(t, Verify([]byte("other"), sig, ts, body, now, 5*time.Minute), ErrBadSignature)
	require.ErrorIs(t, Verify([]byte("k"), sig, "1700000001", body, now, 5*time.Minute), ErrBadSignature)
	require.ErrorIs(t, Verify([]byte("k"), sig, ts, body, now.Add(10*time.Minute), 5*time.Minute), ErrBadSignature)
}

func TestNextRetryDoublesUpToTheCap(t *testing.T) {
	t.Parallel()
	c := Config{Backoff: time.Second, MaxBackoff: 5 * time.Second}
	at := time.Unix(0, 0)
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 9: 5 * time.Second} {
		d := c.NextRetry(at, attempt, 42).Sub(at)
		require.GreaterOrEqual(t, d, want)
		require.LessOrEqual(t, d, want+want/10)
		require.Equal(t, d, c.NextRetry(at, attempt, 42).Sub(at), "the same seed gives the same time")
	}
}
