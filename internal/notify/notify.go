// Package notify posts Loupe's webhooks: a JSON body a Slack incoming webhook accepts (its text)
// with Loupe's own fields beside it, signed with HMAC-SHA256 over the timestamp and the raw body.
// It holds no queue: internal/runs enqueues each delivery as a River job in the transaction that
// makes the event happen, and calls Sender.Post for each attempt.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Events a webhook is posted for.
const (
	// EventPending: an interrupt waits for a person (no policy rule decided it).
	EventPending = "interrupt.pending"
	// EventEscalated: an interrupt was handed on to other reviewers (a role, a group).
	EventEscalated = "interrupt.escalated"
	// EventExpired: nobody decided an interrupt before its policy's deadline, which decided it.
	EventExpired = "interrupt.expired"
)

// Headers of a delivery.
const (
	// SignatureHeader is "sha256=" and the hex HMAC-SHA256, keyed by the shared secret, of
	// TimestampHeader's value, a dot, and the raw body.
	SignatureHeader = "X-Loupe-Signature"
	// TimestampHeader is the Unix time, in seconds, of the attempt: a receiver refuses one too
	// old, so that a captured delivery cannot be played again later.
	TimestampHeader = "X-Loupe-Timestamp"
	// EventHeader is the event, as in the body.
	EventHeader = "X-Loupe-Event"
	// IdempotencyHeader is the same on every attempt of one notification (and is the body's id):
	// delivery is at least once, so a receiver drops a key it has seen.
	IdempotencyHeader = "Idempotency-Key"
)

// Secret is the shared secret. It never prints: not with %s or %v, not in JSON, not in slog.
type Secret []byte

func (Secret) String() string               { return "[redacted]" }
func (Secret) GoString() string             { return "[redacted]" }
func (Secret) LogValue() slog.Value         { return slog.StringValue("[redacted]") }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// Config is where and how webhooks are posted.
type Config struct {
	// URLs receive every event. The URL of a Slack incoming webhook is itself a credential: it is
	// logged and shown only as Redact makes it.
	URLs []string
	// Secret signs each delivery. Without one, deliveries go unsigned (and the process warns).
	Secret Secret
	// Timeout cuts an attempt whose receiver does not answer in time. Default 10s.
	Timeout time.Duration
	// MaxAttempts is how many times a notification is tried. Default 12.
	MaxAttempts int
	// Backoff is the wait after the first failed attempt, doubled after each next one up to
	// MaxBackoff. Defaults 10s and 1h: twelve attempts span about three and a half hours.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// BaseURL is the UI's address, for the links in a message ("https://loupe.example.com").
	// Empty leaves the links relative.
	BaseURL string
}

// LogValue logs the receivers redacted and never the secret.
func (c Config) LogValue() slog.Value {
	redacted := make([]string, len(c.URLs))
	for i, u := range c.URLs {
		redacted[i] = Redact(u)
	}
	return slog.GroupValue(slog.Any("urls", redacted), slog.Bool("signed", len(c.Secret) > 0))
}

// Enabled reports whether any webhook is configured.
func (c Config) Enabled() bool { return len(c.URLs) > 0 }

// WithDefaults fills in the zero fields.
func (c Config) WithDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 12
	}
	if c.Backoff <= 0 {
		c.Backoff = 10 * time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = time.Hour
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c
}

// Check refuses a URL that is not absolute http(s).
func (c Config) Check() error {
	for _, raw := range c.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("webhook %s: want an absolute http:// or https:// URL", Redact(raw))
		}
	}
	return nil
}

// Targets are the configured receivers, each under its TargetID.
func (c Config) Targets() map[string]string {
	out := make(map[string]string, len(c.URLs))
	for _, u := range c.URLs {
		out[TargetID(u)] = u
	}
	return out
}

// TargetID names a receiver in the queue and the delivery log without its URL (which may hold a
// token): the first 12 hex digits of the URL's SHA-256.
func TargetID(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return hex.EncodeToString(sum[:6])
}

// Redact is a URL fit for logs and pages: its scheme and host, with any user, path and query
// (where Slack's and most webhooks' tokens are) cut to "…".
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "[a webhook URL]"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		out += "/…"
	}
	return out
}

// Sign is the SignatureHeader value of a body posted at timestamp ts (Unix seconds).
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is a delivery whose signature or timestamp does not check.
var ErrBadSignature = errors.New("bad webhook signature")

// Verify checks a delivery as a receiver must: the signature over the timestamp and the raw body,
// compared in constant time, and a timestamp within tolerance of now.
func Verify(secret []byte, signature, ts string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrBadSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s is %s away from now", ErrBadSignature, ts, d.Round(time.Second))
	}
	if !hmac.Equal([]byte(signature), []byte(Sign(secret, ts, body))) {
		return fmt.Errorf("%w: the signature does not match", ErrBadSignature)
	}
	return nil
}

// Sender posts deliveries.
type Sender struct {
	Secret  Secret
	Timeout time.Duration
	Client  *http.Client // default: a client of its own
}

// Post makes one attempt and returns the receiver's status code (0 when none answered). Any
// answer but a 2xx is an error. Errors name the receiver only as Redact does.
func (s *Sender) Post(ctx context.Context, rawURL, event, key string, body []byte) (int, error) {
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("post to %s: bad request", Redact(rawURL))
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Loupe-Webhook/1")
	req.Header.Set(EventHeader, event)
	req.Header.Set(IdempotencyHeader, key)
	req.Header.Set(TimestampHeader, ts)
	if len(s.Secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(s.Secret, ts, body))
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message holds the whole URL
		}
		if ctx.Err() == context.DeadlineExceeded {
			return 0, fmt.Errorf("post to %s: no answer within %s", Redact(rawURL), s.Timeout)
		}
		return 0, fmt.Errorf("post to %s: %w", Redact(rawURL), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("post to %s: the receiver answered %s", Redact(rawURL), resp.Status)
	}
	return resp.StatusCode, nil
}

// NextRetry is when attempt (from 1) is tried again after it failed at failedAt: Backoff doubled
// per attempt up to MaxBackoff, plus a jitter of up to a tenth drawn from seed, so that the same
// seed and attempt always give the same time (the delivery log shows the time River uses).
func (c Config) NextRetry(failedAt time.Time, attempt int, seed int64) time.Time {
	c = c.WithDefaults()
	d := c.Backoff
	for i := 1; i < attempt && d < c.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.MaxBackoff)
	h := uint64(seed)*0x9e3779b97f4a7c15 + uint64(attempt)*0xbf58476d1ce4e5b9
	h ^= h >> 31
	jitter := time.Duration(h % uint64(d/10+1))
	return failedAt.Add(d + jitter)
}
