package cli

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return "127.0.0.1:" + strconv.Itoa(port)
}

// TestServeWithDatabaseURLStartsNoCluster serves on an external database: it migrates it, is ready,
// runs a demo agent, and never creates the embedded cluster in its data dir. Cancelling the
// context shuts it down cleanly.
func TestServeWithDatabaseURLStartsNoCluster(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)
	dataDir := t.TempDir()
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--dev", "--addr", addr, "--database-url", dbURL, "--data-dir", dataDir, "--log-level", "error"})
	}()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond)
	_, err := os.Stat(filepath.Join(dataDir, "postgres"))
	require.True(t, os.IsNotExist(err), "no private cluster with DATABASE_URL set")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
	_, err = http.Get("http://" + addr + "/healthz")
	require.Error(t, err, "the server is gone")
}

func TestDevModeRefusedOffLoopback(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"serve", "--dev", "--addr", "0.0.0.0:4999", "--database-url", "postgres://unused"})
	require.ErrorContains(t, err, "loopback")
}
