// Package browsertest drives Debian's chromium, headless, through chromedp for UI tests, and records
// every console error, uncaught exception and CSP violation the page produces.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser is one headless Chromium tab plus what it reported.
type Browser struct {
	Ctx context.Context

	mu       sync.Mutex
	problems []string
}

// chromiumPath finds the browser, preferring Debian's chromium.
func chromiumPath() (string, error) {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium found: browser tests need it; install it with: apt-get install -y chromium (or set CHROMIUM_PATH)")
}

// New starts a headless browser for the test and closes it when the test ends. It fails, never
// skips, when no browser is installed. The browser lives five minutes at most: two ran out at a
// long test's last steps when CI's machine was loaded (8758475, 16dbd42), while a step that hangs
// still fails well before the test binary's own timeout.
func New(t testing.TB) *Browser {
	t.Helper()
	return NewWithTimeout(t, 5*time.Minute)
}

// NewWithTimeout is New for a test that needs the browser longer than New's five minutes.
func NewWithTimeout(t testing.TB, timeout time.Duration) *Browser {
	t.Helper()
	path, err := chromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: Chromium's helpers may still write to the profile for a moment after the
	// browser exits, which would fail the test in TempDir's cleanup.
	profile, err := os.MkdirTemp("", "loupe-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	b := &Browser{Ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, strings.Trim(string(a.Value), `"`)+a.Description)
				}
				b.report("console.%s: %s", ev.Type, strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			b.report("uncaught exception: %s", ev.ExceptionDetails.Error())
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.LevelError || strings.Contains(ev.Entry.Text, "Content Security Policy") {
				b.report("%s log: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
			}
		}
	})
	if err := chromedp.Run(ctx, log.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start chromium (%s): %v", path, err)
	}
	return b
}

func (b *Browser) report(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// Problems returns every console error, exception and CSP violation seen so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Run runs chromedp actions in the tab.
func (b *Browser) Run(actions ...chromedp.Action) error {
	return chromedp.Run(b.Ctx, actions...)
}
