package pgcluster

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no supervisor outlives its cluster's Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
