package cli

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

var (
	portsMu     sync.Mutex
	portsHanded = map[int]bool{} // the ports freePort has returned (or tried) in this test binary
)

// freePort is a loopback address free now, for a server the test starts later. It is taken below
// the kernel's ephemeral range (ip_local_port_range starts at 32768 by default): a port picked
// from that range can be handed to an outgoing connection (to PostgreSQL, to Chromium) before the
// server binds it, which failed a CI run once. Ports are tried at random, so that tests running at
// once rarely try the same, and a port is handed out once per test binary: two servers started
// together got the same free port once (CI, TestServesStartAFreshEmbeddedDataDirAtOnce), and the
// second could not bind it.
func freePort(t *testing.T) string {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		portsMu.Lock()
		taken := portsHanded[port]
		portsHanded[port] = true
		portsMu.Unlock()
		if taken {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		return "127.0.0.1:" + strconv.Itoa(port)
	}
	t.Fatal("no free loopback port between 20000 and 32000")
	return ""
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
