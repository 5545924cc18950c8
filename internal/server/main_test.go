package server

import (
	"testing"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every server, hub, worker, span
// pipeline and browser a test starts is stopped by its cleanup. Handlebars (raymond) lexes in a
// goroutine that a template's parse error leaves blocked on its channel, one per broken template
// the prompt playground is sent (TestPromptPlaygroundBrokenTemplateIs422NamingTheLine).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(storetest.LeakOptions(),
		goleak.IgnoreTopFunction("github.com/mbleigh/raymond/lexer.(*Lexer).produce"))...)
}
