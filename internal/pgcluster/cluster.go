package pgcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// superuser is the cluster's bootstrap role; devui connects as it.
const superuser = "loupe"

// Config says where the cluster lives and how it runs.
type Config struct {
	// DataDir is devui's data directory. The cluster lives in DataDir/postgres.
	DataDir string
	// Database is created on first start; it defaults to "loupe".
	Database string
	// Fast turns off fsync and synchronous commit. Only for throwaway clusters such as tests'.
	Fast bool
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
}

// Cluster is one private PostgreSQL cluster. Start runs it as a supervised child process that Stop
// ends; StartDetached runs it as a daemon that outlives the caller, for scripts and test suites.
type Cluster struct {
	cfg      Config
	binDir   string
	pgData   string
	pwFile   string
	logFile  string
	runAs    *account
	password string
	// port is read by connections being opened while a restart may change it.
	port   atomic.Int32
	policy restartPolicy

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
	// own is the owner lock (owner.go) while this process runs the postmaster as its child.
	own *ownership
	// The supervisor (supervise.go): its cancel, closed when it returns, what it reports.
	cancelSupervisor context.CancelFunc
	supervised       chan struct{}
	health           Health
	failed           chan error
}

// New finds the server binaries and prepares a cluster under cfg.DataDir. It returns ErrNoBinaries
// when PostgreSQL is not installed.
func New(cfg Config) (*Cluster, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("pgcluster: data dir is required")
	}
	if cfg.Database == "" {
		cfg.Database = "loupe"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: data dir %q: %w", cfg.DataDir, err)
	}
	cfg.DataDir = dataDir
	binDir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	var runAs *account // the current user
	if os.Geteuid() == 0 {
		if runAs, err = serverAccount(); err != nil {
			return nil, err
		}
	}
	return &Cluster{
		cfg:     cfg,
		binDir:  binDir,
		pgData:  filepath.Join(dataDir, "postgres"),
		pwFile:  filepath.Join(dataDir, "postgres.password"),
		logFile: filepath.Join(dataDir, "postgres.log"),
		runAs:   runAs,
		policy:  defaultRestartPolicy,
		failed:  make(chan error, 1),
	}, nil
}

// DataDir is the cluster's PGDATA directory.
func (c *Cluster) DataDir() string { return c.pgData }

// URL is the connection string of the cluster's database, over loopback TCP with a password.
func (c *Cluster) URL() string {
	return connURL(c.Port(), c.password, c.cfg.Database)
}

// Port is the cluster's loopback port. A restart keeps it unless another program took it
// meanwhile, so a pool should ask for it in its BeforeConnect hook rather than keep URL's.
func (c *Cluster) Port() int { return int(c.port.Load()) }

func connURL(port int, password, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Start runs the cluster as a child process: it initialises the cluster on first use, recovers from a
// crashed previous run, starts postgres on a free loopback port, waits until it accepts connections
// and creates the database. The child gets SIGINT if this process dies, so it never outlives devui.
// If the child dies while ctx lasts and Stop has not been called, it is restarted (supervise.go).
//
// When another devui already runs postgres on this cluster, Start uses that server, and takes it
// over should that devui end (owner.go): it then starts postgres as its own child. A daemon of
// StartDetached (devui db start) is used without owning it: Stop leaves it running, and nobody here
// restarts it.
func (c *Cluster) Start(ctx context.Context) error {
	unlock, own, att, err := c.lockAndAttach(ctx)
	if err != nil {
		return err
	}
	switch att {
	case watching:
		c.startSupervisor(ctx, nil)
		return nil
	case detached:
		return nil
	}
	defer unlock()
	if err := c.adopt(own); err != nil {
		c.Stop()
		return err
	}
	if err := c.pickPort(c.lastPort()); err != nil {
		c.Stop()
		return err
	}
	exited, err := c.spawn(ctx)
	if err != nil {
		c.Stop()
		return err
	}
	if err := c.createDatabase(ctx); err != nil {
		c.Stop()
		return err
	}
	c.startSupervisor(ctx, exited)
	return nil
}

// adopt makes own this process's hold on the cluster and records it in the owner file, before a
// postmaster is started as this process's child. It releases own and refuses once Stop was called.
func (c *Cluster) adopt(own *ownership) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		if own != c.own {
			own.release(false)
		}
		return errStopped
	}
	c.own = own
	return own.record()
}

// spawn starts postgres as a child on c.port and waits until it accepts connections. The start lock
// must be held. It returns the channel closed when the child exits. It refuses once Stop was called,
// so that a restart never outlives Stop.
func (c *Cluster) spawn(ctx context.Context) (<-chan struct{}, error) {
	logf, err := os.OpenFile(c.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: open log: %w", err)
	}
	cmd := exec.Command(c.binary("postgres"), c.serverArgs()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.pgData
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Ctrl-C reaches devui, which then stops postgres in order (not its children, which
		// are groups of their own: see clusterProcesses).
		Setpgid:    true,
		Pdeathsig:  syscall.SIGINT,
		Credential: c.runAs.credential(),
	}
	c.cfg.Logger.Info("starting embedded PostgreSQL", "data_dir", c.pgData, "port", c.Port(), "bin_dir", c.binDir)
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, errors.Join(errStopped, logf.Close())
	}
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		return nil, errors.Join(fmt.Errorf("pgcluster: start postgres: %w", err), logf.Close())
	}
	exited := make(chan struct{})
	c.cmd, c.exited = cmd, exited
	c.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		// Postgres wrote the log through its own descriptor; closing ours loses nothing.
		_ = logf.Close()
		close(exited)
	}()
	if err := c.waitReady(ctx, exited, nil); err != nil {
		terminate(cmd, exited)
		return nil, err
	}
	return exited, nil
}

// StartDetached starts the cluster as a daemon through pg_ctl, or reuses it when it already runs.
// It returns once the database accepts connections. StopDetached stops it.
func (c *Cluster) StartDetached(ctx context.Context) error {
	unlock, own, att, err := c.lockAndAttach(ctx)
	if err != nil || att != started {
		return err
	}
	defer unlock()
	// A daemon is nobody's child: the owner file is left empty, and others use it as it is.
	defer own.release(true)
	if err := c.pickPort(c.lastPort()); err != nil {
		return err
	}
	opts := strings.Join(c.serverArgs()[2:], " ")
	c.cfg.Logger.Info("starting PostgreSQL daemon", "data_dir", c.pgData, "port", c.Port())
	if err := c.ctl(ctx, "start", "-w", "-t", "60", "-l", c.daemonLog(), "-o", opts); err != nil {
		return fmt.Errorf("pgcluster: start: %w\n%s", err, c.logTail())
	}
	if err := c.waitReady(ctx, nil, nil); err != nil {
		return err
	}
	return c.createDatabase(ctx)
}

// StopDetached stops a cluster started by StartDetached (or left running by anyone). Stopping a
// cluster that is not running is not an error.
func (c *Cluster) StopDetached(ctx context.Context) error {
	if _, ok := c.runningPort(); !ok {
		return nil
	}
	if err := c.ctl(ctx, "stop", "-w", "-t", "60", "-m", "fast"); err != nil {
		return fmt.Errorf("pgcluster: stop: %w", err)
	}
	return nil
}

// Running reports the URL of the cluster when it is running, for `devui db url`.
func (c *Cluster) Running() (string, bool) {
	port, ok := c.runningPort()
	if !ok {
		return "", false
	}
	pw, err := os.ReadFile(c.pwFile)
	if err != nil {
		return "", false
	}
	return connURL(port, strings.TrimSpace(string(pw)), c.cfg.Database), true
}

// Stop ends a cluster started by Start with a fast shutdown, waiting for postgres to exit, and ends
// its supervision first so that the exit is not taken for a crash. It is safe to call twice and
// without Start.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	cmd, exited, cancel, supervised := c.cmd, c.exited, c.cancelSupervisor, c.supervised
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if cmd != nil {
		c.cfg.Logger.Info("stopping embedded PostgreSQL")
		terminate(cmd, exited)
	}
	if supervised != nil {
		<-supervised
	}
	// Only once postgres has exited: another devui on this data dir then starts its own at once
	// rather than take this one's, shutting down, for a server to attach to.
	c.mu.Lock()
	own := c.own
	c.own = nil
	c.mu.Unlock()
	own.release(true)
}

// terminate asks a child postgres to stop, fast shutdown first, and waits until it has exited.
func terminate(cmd *exec.Cmd, exited <-chan struct{}) {
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, 30 * time.Second}, {syscall.SIGQUIT, 5 * time.Second}, {syscall.SIGKILL, 5 * time.Second}} {
		_ = cmd.Process.Signal(step.sig)
		select {
		case <-exited:
			return
		case <-time.After(step.wait):
		}
	}
}

// attachment says how lockAndAttach left this process with the cluster's postmaster.
type attachment int

const (
	// started: none runs; the caller holds the start lock and the owner lock, and starts one.
	started attachment = iota
	// watching: another live devui owns the running postmaster; this process uses it, and takes
	// it over when that devui is gone.
	watching
	// detached: the running postmaster is a daemon of StartDetached, used as it is.
	detached
)

// errReplaced is returned by an attach whose postmaster exited or began to shut down meanwhile.
var errReplaced = errors.New("pgcluster: the server exited while attaching to it")

// lockAndAttach takes the start lock, prepares the cluster and decides by the owner lock
// (owner.go) who runs the postmaster. When a postmaster runs that is another devui's or a daemon,
// it attaches to that server (waits until ready, creates the database), releases the lock and
// says so. A postmaster left by a devui that died is waited for, or ended, first. Otherwise the
// caller starts one, holding the start lock (unlock) and the owner lock (own).
func (c *Cluster) lockAndAttach(ctx context.Context) (unlock func(), own *ownership, att attachment, err error) {
	waited := false
	for {
		if unlock, err = c.lock(ctx); err != nil {
			return nil, nil, 0, err
		}
		if err := c.prepare(ctx); err != nil {
			unlock()
			return nil, nil, 0, err
		}
		c.mu.Lock()
		own = c.own // a restart by this process's supervisor: it owns the cluster already
		c.mu.Unlock()
		if own == nil {
			if own, err = c.tryOwn(); err != nil {
				unlock()
				return nil, nil, 0, err
			}
		}
		pid := c.postmasterPID()
		stopping := pid != 0 && c.postmasterStatus() == "stopping"
		switch {
		case own != nil && pid == 0:
			return unlock, own, started, nil
		case own != nil && (own.previousOwner() != 0 || stopping):
			c.cfg.Logger.Info("waiting for the PostgreSQL of a devui that is gone to exit", "pid", pid, "data_dir", c.pgData)
			err := c.endLeftover(ctx, pid)
			if err == nil {
				err = c.clearStaleLock(ctx)
			}
			if err != nil {
				c.releaseUnadopted(own)
				unlock()
				return nil, nil, 0, err
			}
			return unlock, own, started, nil
		case own != nil:
			c.releaseUnadopted(own)
			att = detached
		case pid != 0 && !stopping:
			att = watching
		default: // its owner is restarting postgres, or stopping it
			unlock()
			if !waited {
				waited = true
				c.cfg.Logger.Info("waiting for the devui that runs the embedded PostgreSQL to restart or stop it", "data_dir", c.pgData)
			}
			select {
			case <-ctx.Done():
				return nil, nil, 0, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		err = c.attach(ctx, pid, att)
		unlock()
		if errors.Is(err, errReplaced) {
			continue
		}
		if err != nil {
			return nil, nil, 0, err
		}
		return nil, nil, att, nil
	}
}

// releaseUnadopted releases an ownership that lockAndAttach took and nobody adopted.
func (c *Cluster) releaseUnadopted(own *ownership) {
	c.mu.Lock()
	adopted := own == c.own
	c.mu.Unlock()
	if !adopted {
		own.release(false)
	}
}

// attach waits until the postmaster pid accepts connections and creates the database. It returns
// errReplaced when that postmaster exits or starts to shut down meanwhile.
func (c *Cluster) attach(ctx context.Context, pid int, att attachment) error {
	_, port, err := readLock(filepath.Join(c.pgData, "postmaster.pid"))
	if err != nil || port == 0 {
		return errReplaced
	}
	c.port.Store(int32(port))
	replaced := func() bool { return c.postmasterPID() != pid || c.postmasterStatus() == "stopping" }
	if err := c.waitReady(ctx, nil, replaced); err != nil {
		return err
	}
	if err := c.createDatabase(ctx); err != nil {
		if replaced() {
			return errReplaced
		}
		return err
	}
	if att == watching {
		c.cfg.Logger.Info("using the PostgreSQL that another devui runs on this data dir; taking it over should that devui end",
			"data_dir", c.pgData, "port", port)
	} else {
		c.cfg.Logger.Info("using the PostgreSQL already running on this data dir (devui db start); nobody here restarts it should it stop",
			"data_dir", c.pgData, "port", port)
	}
	return nil
}

// lock serialises the start of the cluster across processes (two devui started at once, or a
// test suite's packages), so that only one runs initdb and postgres and the others use it. It waits
// for the lock until ctx ends.
func (c *Cluster) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(c.cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: create data dir: %w", err)
	}
	f, err := os.OpenFile(c.lockFile(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: open lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.Join(fmt.Errorf("pgcluster: lock %s: %w", f.Name(), err), f.Close())
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("pgcluster: wait for lock %s: %w", f.Name(), ctx.Err()), f.Close())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close() // nothing was written to it, and closing it releases the lock anyway
	}, nil
}

// lockFile is the file whose flock serialises starts of the cluster.
func (c *Cluster) lockFile() string { return filepath.Join(c.cfg.DataDir, "postgres.lock") }

// prepare creates the data directory and the cluster on first use and clears a stale lock left by
// a crash.
func (c *Cluster) prepare(ctx context.Context) error {
	if err := os.MkdirAll(c.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("pgcluster: create data dir: %w", err)
	}
	if err := c.runAs.checkReachable(c.cfg.DataDir); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(c.pgData, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	pw, err := os.ReadFile(c.pwFile)
	if err != nil {
		return fmt.Errorf("pgcluster: read password (remove %s to start afresh): %w", c.pgData, err)
	}
	c.password = strings.TrimSpace(string(pw))
	return c.clearStaleLock(ctx)
}

// initdb creates the cluster in a scratch directory and renames it into place, so that an initdb
// that fails halfway never leaves a broken cluster behind.
func (c *Cluster) initdb(ctx context.Context) error {
	scratch := c.pgData + ".init"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("pgcluster: clear %s: %w", scratch, err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return fmt.Errorf("pgcluster: create %s: %w", scratch, err)
	}
	if err := c.runAs.own(scratch); err != nil {
		return err
	}
	password := randomHex(24)
	tmpPw := filepath.Join(c.cfg.DataDir, "initdb.pw")
	defer func() {
		if err := os.Remove(tmpPw); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.cfg.Logger.Warn("remove initdb's password file", "path", tmpPw, "err", err)
		}
	}()
	if err := os.WriteFile(tmpPw, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgcluster: write password: %w", err)
	}
	if err := c.runAs.own(tmpPw); err != nil {
		return err
	}
	c.cfg.Logger.Info("initialising embedded PostgreSQL cluster", "data_dir", c.pgData, "initdb", versionOf(c.binary("initdb")))
	cmd := exec.CommandContext(ctx, c.binary("initdb"),
		"-D", scratch, "-U", superuser, "--pwfile", tmpPw,
		"--auth-local", "trust", "--auth-host", "scram-sha-256",
		"-E", "UTF8", "--locale", "C", "--no-instructions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.runAs.credential()}
	cmd.Dir = scratch
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: initdb: %w\n%s", err, out)
	}
	if err := os.WriteFile(c.pwFile, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgcluster: write password: %w", err)
	}
	if err := os.Rename(scratch, c.pgData); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// clearStaleLock handles postmaster.pid. A lock whose process is gone, or is no postgres, is left
// by a crash and removed. A postgres still running on this cluster is left alone: runningPort finds
// it, and Start and StartDetached use it.
func (c *Cluster) clearStaleLock(ctx context.Context) error {
	lock := filepath.Join(c.pgData, "postmaster.pid")
	pid, _, err := readLock(lock)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || !isPostgres(pid) {
		c.cfg.Logger.Info("removing stale postmaster.pid left by a crash", "pid", pid)
		if err := os.Remove(lock); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pgcluster: remove stale lock: %w", err)
		}
	}
	return nil
}

// runningPort reports the port of a postgres that is running on this cluster right now.
func (c *Cluster) runningPort() (int, bool) {
	pid, port, err := readLock(filepath.Join(c.pgData, "postmaster.pid"))
	if err != nil || port == 0 || !isPostgres(pid) {
		return 0, false
	}
	return port, true
}

// pickPort chooses the port to start on: prefer when it is free (a restart keeps its port, so
// connection strings handed out stay right), otherwise any free one.
// portFile keeps the port the cluster last ran on, so that the next start (after a crash, a
// reboot or a stop) takes it again when it is free, and URLs that scripts and other programs saved
// keep working.
func (c *Cluster) portFile() string { return filepath.Join(c.pgData, "loupe.port") }

// lastPort is the port the cluster last ran on, or 0.
func (c *Cluster) lastPort() int {
	b, err := os.ReadFile(c.portFile())
	if err != nil {
		return 0
	}
	port, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return port
}

func (c *Cluster) savePort() {
	_ = os.WriteFile(c.portFile(), []byte(strconv.Itoa(c.Port())+"\n"), 0o600)
	// In PGDATA, the file is the server account's like the rest, so that a base backup
	// (NewStandby) can read it.
	_ = c.runAs.own(c.portFile())
}

func (c *Cluster) pickPort(prefer int) error {
	if prefer > 0 {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(prefer))); err == nil {
			c.port.Store(int32(prefer))
			c.savePort()
			return l.Close()
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	c.port.Store(int32(l.Addr().(*net.TCPAddr).Port))
	c.savePort()
	return l.Close()
}

// serverArgs are the postgres arguments; the first two are "-D <pgdata>".
func (c *Cluster) serverArgs() []string {
	args := []string{
		"-D", c.pgData,
		"-p", strconv.Itoa(c.Port()),
		"-k", c.socketDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		// A private cluster on a developer's machine, written to in bursts by trace ingest and
		// runs: more buffers than the default 128MB, and fewer checkpoints, each of which makes
		// the next write of every page log it whole.
		"-c", "shared_buffers=256MB",
		"-c", "wal_buffers=16MB",
		"-c", "max_wal_size=4GB",
		"-c", "checkpoint_timeout=15min",
	}
	if c.cfg.Fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	return args
}

// socketDir is the data directory, unless its path is too long for a unix socket (about 107 bytes).
func (c *Cluster) socketDir() string {
	if len(c.pgData)+len("/.s.PGSQL.65535.lock") < 100 {
		return c.pgData
	}
	return os.TempDir()
}

// ctl runs pg_ctl on this cluster as the server's account.
func (c *Cluster) ctl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, c.binary("pg_ctl"), append([]string{"-D", c.pgData}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.runAs.credential()}
	cmd.Dir = c.pgData
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", args[0], err, bytes.TrimSpace(out))
	}
	return nil
}

// waitReady polls until the server accepts a connection, the child exits, replaced reports that
// the server being attached to is no longer the one (errReplaced), or a minute passes without
// progress. A server that says it is starting up or recovering (57P03) is making progress, and
// crash recovery may replay gigabytes of WAL, so each such answer extends the wait.
func (c *Cluster) waitReady(ctx context.Context, exited <-chan struct{}, replaced func() bool) error {
	deadline := time.Now().Add(60 * time.Second)
	var lastErr error
	for {
		connCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(connCtx, connURL(c.Port(), c.password, "postgres"))
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		if replaced != nil && replaced() {
			return errReplaced
		}
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "57P03" { // cannot_connect_now
			deadline = time.Now().Add(60 * time.Second)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgcluster: postgres not ready after 60s: %w\n%s", lastErr, c.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("pgcluster: postgres exited during start-up\n%s", c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) createDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, connURL(c.Port(), c.password, "postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.cfg.Database).Scan(&exists); err != nil {
		return fmt.Errorf("pgcluster: check database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.cfg.Database}.Sanitize()); err != nil {
		return fmt.Errorf("pgcluster: create database %s: %w", c.cfg.Database, err)
	}
	return nil
}

// daemonLog is where pg_ctl writes the server log of a detached cluster: inside PGDATA, because
// the server's account must be able to write it.
func (c *Cluster) daemonLog() string { return filepath.Join(c.pgData, "daemon.log") }

// logTail returns the end of the server log, for error messages.
func (c *Cluster) logTail() string {
	data, err := os.ReadFile(c.logFile)
	c.mu.Lock()
	owned := c.cmd != nil
	c.mu.Unlock()
	if _, running := c.runningPort(); err != nil || (!owned && running) {
		if d, derr := os.ReadFile(c.daemonLog()); derr == nil {
			data, err = d, nil
		}
	}
	if err != nil {
		return ""
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return "postgres log (tail):\n" + string(data)
}

// readLock parses postmaster.pid: line 1 is the pid, line 4 the port.
func readLock(path string) (pid, port int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	lines := strings.Split(string(data), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		return 0, 0, fmt.Errorf("parse %s: %w", path, err)
	}
	if len(lines) > 3 {
		port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	return pid, port, nil
}

// isPostgres reports whether pid is a live postgres process.
func isPostgres(pid int) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		// No /proc (macOS): fall back to signal 0.
		if errors.Is(err, os.ErrNotExist) {
			if _, statErr := os.Stat("/proc/self"); statErr == nil {
				return false
			}
		}
		return syscall.Kill(pid, 0) == nil
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return strings.HasPrefix(filepath.Base(string(argv0)), "postgres")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
