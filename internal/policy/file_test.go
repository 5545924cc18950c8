package policy_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/policy"
)

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func TestWatchFileLoadsChangesAndKeepsTheLastGoodVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(path, []byte("rules: []\n"), 0o644))
	var mu sync.Mutex
	var loaded []string
	load := func(src []byte) error {
		if _, err := policy.Parse(src); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		loaded = append(loaded, string(src))
		return nil
	}
	got := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), loaded...) }
	logs := &syncLog{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, policy.WatchFile(ctx, path, 10*time.Millisecond, slog.New(slog.NewTextHandler(logs, nil)), load))
	require.Equal(t, []string{"rules: []\n"}, got())

	require.NoError(t, os.WriteFile(path, []byte("rules:\n  - name: x\n    decide: ask\n"), 0o644))
	require.Eventually(t, func() bool { return len(got()) == 2 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(path, []byte("rules:\n  - name: x\n    decide: nope\n"), 0o644))
	require.Eventually(t, func() bool { return bytes.Contains([]byte(logs.String()), []byte("last good version stays in force")) }, 5*time.Second, 10*time.Millisecond)
	require.Len(t, got(), 2, "a broken file is not loaded")

	// A broken file at start is an error.
	require.Error(t, policy.WatchFile(ctx, path, time.Second, slog.New(slog.DiscardHandler), load))
}
