package trace_test

import (
	"strings"
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
