package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// smallDisk is a test database whose files lie on a small tmpfs of their own (a tablespace of
// the test cluster), which the test fills and frees. The cluster's WAL stays where it was, so a
// full disk makes PostgreSQL refuse what needs a new page (SQLSTATE 53100) rather than crash.
type smallDisk struct {
	filler string // the file that fills it
}

// newSmallDisk creates a test database on a 32 MiB tmpfs. Mounting needs root, as CI runs.
func newSmallDisk(t *testing.T) (string, *smallDisk) {
	t.Helper()
	require.Zero(t, os.Geteuid(), "this test mounts a tmpfs to fill, which needs root (CI and the dev container run as root)")
	ctx := context.Background()
	dbURL := storetest.NewURL(t)
	name := dbName(dbURL)
	admin, err := pgxpool.New(ctx, strings.Replace(dbURL, "/"+name+"?", "/postgres?", 1))
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	var dataDir string
	require.NoError(t, admin.QueryRow(ctx, `SHOW data_directory`).Scan(&dataDir))
	fi, err := os.Stat(dataDir)
	require.NoError(t, err, "the test cluster's data directory must be on this machine")
	owner := fi.Sys().(*syscall.Stat_t)

	parent, err := os.MkdirTemp("", "loupe-small-disk-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(parent, 0o755))
	dir := filepath.Join(parent, "ts")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=32m,mode=0700,uid=%d,gid=%d", owner.Uid, owner.Gid)))
	space := "loupe_small_" + strings.TrimPrefix(name, "loupe_test_")
	_, err = admin.Exec(ctx, `CREATE TABLESPACE `+space+` LOCATION '`+dir+`'`)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Before storetest's own cleanup, which drops the database: the tablespace goes after it.
		ctx := context.Background()
		_, err := admin.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
		require.NoError(t, err)
		_, err = admin.Exec(ctx, `DROP TABLESPACE `+space)
		require.NoError(t, err)
		// A backend may still hold a file of the dropped database open: detach, and the kernel frees
		// the tmpfs when the last one is closed.
		require.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH))
		require.NoError(t, os.RemoveAll(parent))
	})
	_, err = admin.Exec(ctx, `ALTER DATABASE `+name+` SET TABLESPACE `+space)
	require.NoError(t, err)
	return dbURL, &smallDisk{filler: filepath.Join(dir, "filler")}
}

// fill writes a file until the disk has no room left.
func (d *smallDisk) fill(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(d.filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer f.Close()
	for _, size := range []int{1 << 20, 4 << 10, 512, 1} {
		chunk := make([]byte, size)
		for {
			if _, err := f.Write(chunk); err != nil {
				require.True(t, errors.Is(err, syscall.ENOSPC), "fill: %v", err)
				break
			}
		}
	}
}

// free removes what fill wrote.
func (d *smallDisk) free(t *testing.T) {
	t.Helper()
	require.NoError(t, os.Remove(d.filler))
}

// TestFullDiskIs503AndReadyzSaysSo fills the disk under a serving Loupe whose runs execute: a
// start that finds no room is a 503 database_unavailable naming the full disk, with Retry-After,
// and /readyz reports it (reads and pings still succeed) for as long as a write finds no room.
// River's completer gives up on its batches meanwhile ("Too many errors; giving up"); once the
// disk is freed, readiness returns, every run that was accepted succeeds and every job leaves
// running: nothing is left behind.
func TestFullDiskIs503AndReadyzSaysSo(t *testing.T) {
	dbURL, disk := newSmallDisk(t)
	b := setup(t, opts{dev: true, stack: true, dbURL: dbURL, log: &syncBuffer{}, runsLog: &syncBuffer{}})
	ctx := context.Background()
	start := func(from int) (*http.Response, string) {
		resp, err := http.Post(b.url+"/api/v1/runs", "application/json", strings.NewReader(fmt.Sprintf(`{"action":"/flow/countdown","input":{"from":%d}}`, from)))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}
	var accepted []uuid.UUID
	accept := func(resp *http.Response, body string) {
		require.Equal(t, http.StatusCreated, resp.StatusCode, body)
		var run store.Run
		require.NoError(t, json.Unmarshal([]byte(body), &run))
		accepted = append(accepted, run.ID)
	}
	for range 4 {
		accept(start(15)) // 3 s each: they write their ticks while the disk is full
	}

	disk.fill(t)
	// Starting runs until one finds no room, and on until River's completer has given up on a
	// batch of job completions: every answer is a 201 or a 503, never a 500.
	gaveUp := func() bool { return strings.Contains(b.runsLog.String(), "Too many errors; giving up") }
	var refused *http.Response
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(2 * time.Minute); refused == nil || !gaveUp(); <-poll.C {
		require.True(t, time.Now().Before(deadline), "no 503 (%v) or River never gave up (%v)", refused != nil, gaveUp())
		resp, body := start(2)
		if resp.StatusCode == http.StatusCreated {
			accept(resp, body)
			continue
		}
		requireDatabaseUnavailable(t, resp, body, "no space left on device since ")
		refused = resp
	}
	t.Logf("%d runs accepted", len(accepted))

	resp, body := get(t, b.url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	var ready map[string]string
	require.NoError(t, json.Unmarshal([]byte(body), &ready))
	require.Equal(t, "unavailable", ready["status"])
	require.Regexp(t, `^no space left on device since \d{4}-\d\d-\d\dT[0-9:]+Z: .*No space left on device \(SQLSTATE 53100\)$`, ready["database"])
	resp, _ = get(t, b.url+"/api/v1/runs")
	require.Equal(t, http.StatusOK, resp.StatusCode, "reads still work")

	disk.free(t)
	require.Eventually(t, func() bool {
		resp, _ := get(t, b.url+"/readyz")
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "readiness returns once the disk has room")
	for _, id := range accepted {
		b.waitStatus(t, id, store.RunSucceeded)
	}
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state <> 'completed'`).Scan(&left))
		return left == 0
	}, 30*time.Second, 50*time.Millisecond, "every job, those whose completion River gave up on included, is completed")
	require.NotContains(t, b.log.String(), `msg="request failed" `, "no request was a 500")
}
