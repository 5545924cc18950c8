package devui_test

import (
	"testing"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: a Handler that was stopped, and a Run
// that returned, leave nothing running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storetest.LeakOptions()...)
}
