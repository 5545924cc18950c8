package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestProcessesStartedTogetherOnAFreshDatabaseAllSucceed starts two `devui serve` and two
// `devui migrate` at once on an empty database, as a deploy of replicas does on its first boot,
// twenty times: every process succeeds (the serves become ready, the migrates exit 0 with the
// schema at the latest migration), and each migration is applied exactly once. Without the
// migration lock, most trials lose a process to `duplicate key value violates unique constraint
// "pg_type_typname_nsp_index"`.
func TestProcessesStartedTogetherOnAFreshDatabaseAllSucceed(t *testing.T) {
	t.Parallel()
	bin := buildDevui(t)
	for trial := range 20 {
		t.Run(fmt.Sprintf("trial %02d", trial+1), func(t *testing.T) {
			dbURL := storetest.NewEmptyURL(t)
			dataDir := t.TempDir()
			var serves, migrates []*devuiProcess
			for range 2 {
				serves = append(serves, serveDevui(t, bin, dataDir, "--database-url", dbURL, "--workers", "1", "--log-level", "warn"))
				migrates = append(migrates, runDevui(t, bin, dataDir, "migrate", "--database-url", dbURL, "--log-level", "warn"))
			}
			for _, m := range migrates {
				require.NoError(t, m.wait(t, 2*time.Minute), "devui migrate: %s", m.log.String())
				got := regexp.MustCompile(`schema at migration (\d+) \(latest (\d+)\)`).FindStringSubmatch(m.log.String())
				require.NotNil(t, got, m.log.String())
				require.Equal(t, got[2], got[1], "devui migrate leaves the schema at the latest migration")
			}
			for _, s := range serves {
				s.waitReady(t, 2*time.Minute)
			}
			for _, s := range serves {
				s.interrupt(t)
			}
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, dbURL)
			require.NoError(t, err)
			defer conn.Close(ctx)
			var rows, versions int
			require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&rows, &versions))
			require.Equal(t, versions, rows, "each migration is recorded once")
		})
	}
}

// TestServesStartAFreshEmbeddedDataDirAtOnce starts four `devui serve` together on a data dir
// that has no cluster yet, twenty times: one creates and starts the cluster, the others wait for
// it and use it, all four become ready, and all exit cleanly on SIGINT one after the other (each
// owner's end hands the cluster to one still running), leaving no PostgreSQL behind. Before the
// migration lock, two serves on a fresh data dir lost one to a migration race ("duplicate key
// value violates unique constraint") in 5 trials of 6.
func TestServesStartAFreshEmbeddedDataDirAtOnce(t *testing.T) {
	t.Parallel()
	bin := buildDevui(t)
	for trial := range 20 {
		t.Run(fmt.Sprintf("trial %02d", trial+1), func(t *testing.T) {
			dataDir := newDataDir(t)
			var serves []*devuiProcess
			for range 4 {
				serves = append(serves, serveDevui(t, bin, dataDir, "--workers", "1"))
			}
			for _, s := range serves {
				s.waitReady(t, 2*time.Minute)
			}
			for _, s := range serves {
				s.interrupt(t)
			}
			_, err := os.Stat(filepath.Join(dataDir, "postgres", "postmaster.pid"))
			require.True(t, os.IsNotExist(err), "no PostgreSQL is left running on the data dir")
		})
	}
}
