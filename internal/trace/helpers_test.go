package trace_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/trace"
)

// gather renders the metrics in the text exposition format.
func gather(t *testing.T, m *trace.Metrics) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collectors()...)
	fams, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range fams {
		_, err := expfmt.MetricFamilyToText(&b, f)
		require.NoError(t, err)
	}
	return b.String()
}

// recordingPublisher keeps the span events it receives.
type recordingPublisher struct {
	mu     sync.Mutex
	events []trace.SpanEvent
}

func (p *recordingPublisher) Publish(ev trace.SpanEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, ev)
}

// count returns how many events of type typ were published.
func (p *recordingPublisher) count(typ string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ev := range p.events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}
