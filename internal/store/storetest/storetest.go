// Package storetest gives each test its own freshly migrated PostgreSQL database, cloned from a
// template database so that a clone costs milliseconds. It uses TEST_DATABASE_URL when set and
// otherwise Loupe's managed cluster, started once and shared by every test package of a run.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe/internal/pgcluster"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/migrations"
)

// howToFix is appended to every failure to get a database.
const howToFix = `database tests need PostgreSQL: install the server binaries (apt-get install -y postgresql, or brew install postgresql@16) so the managed test cluster can start, or set TEST_DATABASE_URL to a server where this user may CREATE DATABASE`

var (
	setupOnce sync.Once
	adminURL  string // a URL on the server's maintenance database
	template  string // the migrated template database's name
	setupErr  error
)

// ClusterDir is where the managed test cluster lives: LOUPE_TEST_DATA_DIR, or a directory under
// the system temp dir named after the user and the checkout, so that every test package of a run
// shares one cluster while two checkouts testing at once (or CI beside a developer's `make test`)
// never stop each other's. The Makefile computes the same name (loupe-test-<uid>-<hash>).
func ClusterDir() string {
	if dir := os.Getenv("LOUPE_TEST_DATA_DIR"); dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("loupe-test-%d-%s", os.Getuid(), checkoutKey(moduleRoot())))
}

// checkoutKey names a checkout by its path: the first 12 hex digits of its SHA-256.
func checkoutKey(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:])[:12]
}

// moduleRoot is the directory of the go.mod above the working directory (a test runs in its
// package's directory), or the working directory itself when there is none.
func moduleRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
}

// NewURL creates a fresh migrated database for the test and returns its URL. The database is
// dropped when the test ends.
func NewURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, createFromTemplate)
}

// NewSeededURL creates a fresh migrated database holding what seed stored, and returns its URL;
// the database is dropped when the test ends. seed runs once per cluster and key, on a template
// kept beside the migrated one (named after the migrations and key), so that a dataset that takes
// half a minute to build (a million spans) costs a file copy in every later test and run. Change
// key whenever seed changes what it stores.
func NewSeededURL(t testing.TB, key string, seed func(ctx context.Context, url string) error) string {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("storetest: %v", setupErr)
	}
	seeded := template + "_" + key
	if err := buildSeeded(seeded, seed); err != nil {
		t.Fatalf("storetest: seed %s: %v", seeded, err)
	}
	return newDatabase(t, func(ctx context.Context, conn *pgx.Conn, name string) error {
		// FILE_COPY copies the files as they are, much faster than WAL_LOG for a big template.
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+seeded+" STRATEGY FILE_COPY"); err != nil {
			return fmt.Errorf("create database %s from %s: %w", name, seeded, err)
		}
		return nil
	})
}

// buildSeeded builds the seeded template name once, under an advisory lock (other processes wait,
// then find it), from a migrated clone that seed fills.
func buildSeeded(name string, seed func(ctx context.Context, url string) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7340212)"); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7340212)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up: %w", err)
	}
	if exists {
		return nil
	}
	building := name + "_b"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop half-built: %w", err)
	}
	if err := createFromTemplate(ctx, conn, building); err != nil {
		return err
	}
	if err := seed(ctx, withDatabase(adminURL, building)); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// NewEmptyURL creates a fresh database with no schema at all, as a first deploy finds it, and
// returns its URL. The database is dropped when the test ends.
func NewEmptyURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, func(ctx context.Context, conn *pgx.Conn, name string) error {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return fmt.Errorf("create database %s: %w", name, err)
		}
		return nil
	})
}

// newDatabase creates a database named for the test with create, drops it when the test ends, and
// returns its URL.
func newDatabase(t testing.TB, create func(ctx context.Context, conn *pgx.Conn, name string) error) string {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("storetest: %v", setupErr)
	}
	ctx := context.Background()
	name := "loupe_test_" + randomSuffix()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("storetest: connect: %v\n%s", err, howToFix)
	}
	defer conn.Close(ctx)
	if err := create(ctx, conn, name); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("storetest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("storetest: drop %s: %v", name, err)
		}
	})
	return withDatabase(adminURL, name)
}

// NewPool returns a pool on a fresh migrated database, closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewURL(t))
	if err != nil {
		t.Fatalf("storetest: pool config: %v", err)
	}
	store.SessionDefaults(cfg.ConnConfig) // as Loupe's processes open theirs
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("storetest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// New returns a Store on a fresh migrated database.
func New(t testing.TB) *store.Store {
	t.Helper()
	return store.New(NewPool(t))
}

// setup finds the server and builds the template database once per test binary.
func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		var err error
		if base, err = startManagedCluster(ctx); err != nil {
			return fmt.Errorf("%w\n%s", err, howToFix)
		}
	}
	adminURL = base
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w\n%s", redact(adminURL), err, howToFix)
	}
	defer conn.Close(ctx)
	template = "loupe_tpl_" + migrationsHash()
	// One process builds the template; the others wait on the advisory lock, then find it.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7340211)"); err != nil {
		return fmt.Errorf("lock template: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7340211)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", template).Scan(&exists); err != nil {
		return fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return nil
	}
	building := template + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop half-built template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	pool, err := pgxpool.New(ctx, withDatabase(adminURL, building))
	if err != nil {
		return fmt.Errorf("open template: %w", err)
	}
	_, err = store.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+template); err != nil {
		return fmt.Errorf("publish template: %w", err)
	}
	return nil
}

// startManagedCluster starts (or reuses) the shared test cluster, serialised across processes by a
// file lock, and returns the URL of its maintenance database.
func startManagedCluster(ctx context.Context) (string, error) {
	dir := ClusterDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("open lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	cluster, err := pgcluster.New(pgcluster.Config{DataDir: dir, Database: "postgres", Fast: true})
	if err != nil {
		return "", err
	}
	if err := cluster.StartDetached(ctx); err != nil {
		return "", fmt.Errorf("start the managed test cluster in %s: %w", dir, err)
	}
	u, ok := cluster.Running()
	if !ok {
		return "", fmt.Errorf("the managed test cluster in %s did not stay up", dir)
	}
	return u, nil
}

// createFromTemplate clones the template. PostgreSQL refuses while another session is connected
// to the template, which only happens for a moment while it is published, so it retries briefly.
func createFromTemplate(ctx context.Context, conn *pgx.Conn, name string) error {
	var err error
	for range 50 {
		if _, err = conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+template); err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "is being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("create database %s from %s: %w", name, template, err)
}

// migrationsHash names the template after the migrations' content, so a changed migration gets a
// fresh template instead of a stale one.
func migrationsHash() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func withDatabase(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.Path = "/" + name
	return u.String()
}

func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// LeakOptions are goleak's options for a package whose tests use pgx pools: the pool's health
// check goroutines end a moment after Close returns, so they are not a test's leak.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).triggerHealthCheck.func1"),
	}
}
