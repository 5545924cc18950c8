package server

import (
	"testing"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every server, hub, worker, span
// pipeline and browser a test starts is stopped by its cleanup.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storetest.LeakOptions()...)
}
