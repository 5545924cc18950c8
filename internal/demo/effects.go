package demo

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/runs"
)

// effects records each time a demo tool acts (a transfer sent, a flight booked, a search run):
// one JSON line when it starts and one when it ends, appended to Config.EffectsLog. The crash
// harness (make chaos) counts them to prove that no tool call the ledger holds as completed is
// ever dispatched again, and that every start was admitted by its execution's lease check before
// another execution took the run over (the start carries the admission). Several processes may append to one file: each line is one write to a file opened
// with O_APPEND. With no log and no delay, acting costs nothing.
type effects struct {
	delay time.Duration
	mu    sync.Mutex
	f     *os.File
}

// effectLine is one line of the effects log.
type effectLine struct {
	Key   string `json:"key"` // the call's idempotency key: run and ref
	Tool  string `json:"tool"`
	Event string `json:"event"` // start or end
	At    int64  `json:"at"`    // Unix nanoseconds
	PID   int    `json:"pid"`
	// Epoch and Admitted are the call's admission (runs.Admission), for a call a durable run's
	// execution dispatched: its lease epoch, and when it was known to hold the run (Unix ns).
	Epoch    int64 `json:"epoch,omitempty"`
	Admitted int64 `json:"admitted,omitempty"`
}

func newEffects(cfg Config) (*effects, error) {
	fx := &effects{delay: cfg.ToolDelay}
	if cfg.EffectsLog != "" {
		f, err := os.OpenFile(cfg.EffectsLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		fx.f = f
	}
	return fx, nil
}

// act records that tc's tool starts acting, waits the configured delay (a tool takes time, and a
// crash may land in the middle of it), and returns what records the end.
func (fx *effects) act(tc *ai.ToolContext) (end func()) {
	fx.write(tc, "start")
	if fx.delay > 0 {
		select {
		case <-time.After(fx.delay):
		case <-tc.Done():
		}
	}
	return func() { fx.write(tc, "end") }
}

func (fx *effects) write(tc *ai.ToolContext, event string) {
	if fx.f == nil {
		return
	}
	l := effectLine{Key: tc.IdempotencyKey, Tool: tc.Name, Event: event, At: time.Now().UnixNano(), PID: os.Getpid()}
	if a, ok := runs.AdmissionOf(tc); ok {
		l.Epoch, l.Admitted = a.Epoch, a.At.UnixNano()
	}
	line, _ := json.Marshal(l)
	fx.mu.Lock()
	defer fx.mu.Unlock()
	_, _ = fx.f.Write(append(line, '\n'))
}
