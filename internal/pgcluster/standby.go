package pgcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// NewStandby prepares a streaming replica of the running cluster c under dataDir: a base backup
// of c (pg_basebackup with -R, which writes standby.signal and the connection to c) and c's
// password, so that the standby's URL signs in as c's does. Start or StartDetached then runs it
// as a hot standby that follows c and answers reads; it is a Cluster like any other, on a port of
// its own. It is what a test of serve --read-database-url runs against, and the quickest way to a
// local read replica of the embedded cluster.
func (c *Cluster) NewStandby(ctx context.Context, dataDir string) (*Cluster, error) {
	if c.Port() == 0 || c.password == "" {
		return nil, fmt.Errorf("pgcluster: standby of %s: the cluster is not running", c.pgData)
	}
	s, err := New(Config{DataDir: dataDir, Database: c.cfg.Database, Fast: c.cfg.Fast, Logger: c.cfg.Logger})
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(s.pgData); err == nil {
		return nil, fmt.Errorf("pgcluster: standby: %s exists already", s.pgData)
	}
	if err := os.MkdirAll(s.cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: standby: %w", err)
	}
	if err := s.runAs.checkReachable(s.cfg.DataDir); err != nil {
		return nil, err
	}
	scratch := s.pgData + ".init"
	if err := os.RemoveAll(scratch); err != nil {
		return nil, fmt.Errorf("pgcluster: standby: %w", err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return nil, fmt.Errorf("pgcluster: standby: %w", err)
	}
	if err := s.runAs.own(scratch); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, c.binary("pg_basebackup"), "-D", scratch, "-R", "-X", "stream", "--checkpoint", "fast",
		"-h", "127.0.0.1", "-p", strconv.Itoa(c.Port()), "-U", superuser, "--no-password")
	cmd.Env = append(os.Environ(), "PGPASSWORD="+c.password)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.runAs.credential()}
	cmd.Dir = scratch
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgcluster: pg_basebackup: %w\n%s", err, out)
	}
	// The primary's port file came with the backup; the standby picks its own port.
	_ = os.Remove(filepath.Join(scratch, "loupe.port"))
	if err := os.WriteFile(s.pwFile, []byte(c.password+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("pgcluster: standby: write password: %w", err)
	}
	if err := os.Rename(scratch, s.pgData); err != nil {
		return nil, fmt.Errorf("pgcluster: standby: %w", err)
	}
	return s, nil
}
