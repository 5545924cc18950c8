package trace_test

import (
	"testing"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storetest.LeakOptions()...)
}
