package cli

import (
	"testing"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every command a test runs stops what
// it started (servers, workers, hubs, clusters, Genkit app watchers) before it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storetest.LeakOptions()...)
}
