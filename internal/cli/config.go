package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// version is the running program's version (Program.Version), set once by Run before any command
// runs.
var version = "dev"

// config is devui's configuration, parsed once from flags and the environment and passed down
// explicitly. Flags win over environment variables, which win over defaults.
type config struct {
	program *Program
	// mayCreate lets the command create the embedded cluster where none is (serve, db start).
	mayCreate bool
	// dataDirGiven is set when --data-dir or LOUPE_DATA_DIR names the data directory.
	dataDirGiven bool
	DatabaseURL  string
	// ReadDatabaseURL is a read replica for the trace and list pages (serve --read-database-url).
	ReadDatabaseURL string
	Addr            string
	DataDir         string
	LogLevel        string
	LogFormat       string
	// MaxConns caps the process's pool of connections to DATABASE_URL (--max-conns); 0 keeps the
	// default, the URL's pool_max_conns but at least defaultMaxConns. The live hub's LISTEN
	// connection, and River's in a process that executes runs, leave the pool (pgx Hijack) and
	// come on top.
	MaxConns int
	// outages keeps a database outage to two log lines (outagelog.go); the pool reports to it.
	outages outageState
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// bindCommon registers the flags every subcommand shares.
func (c *config) bindCommon(fs *pflag.FlagSet) {
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL; empty starts the embedded cluster (env DATABASE_URL)")
	fs.StringVar(&c.DataDir, "data-dir", envOr("LOUPE_DATA_DIR", defaultDataDir), "data directory, home of the embedded cluster (env LOUPE_DATA_DIR)")
	fs.StringVar(&c.LogLevel, "log-level", envOr("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", envOr("LOG_FORMAT", "text"), "text or json (env LOG_FORMAT)")
	fs.IntVar(&c.MaxConns, "max-conns", 0, fmt.Sprintf("most connections the process's pool opens to the database, at least %d; 0 means %d, or the URL's pool_max_conns if larger; the LISTEN connections (the live hub's, and River's where runs execute) come on top (env LOUPE_MAX_CONNS)", minMaxConns, defaultMaxConns))
}

const (
	// defaultMaxConns is the pool's size when neither --max-conns nor pool_max_conns says more.
	defaultMaxConns = 20
	// minMaxConns leaves room for a run's writes, its lease's heartbeat, River's fetches and
	// completions, and a request or two at once.
	minMaxConns = 4
)

// maxConns is the pool size --max-conns or LOUPE_MAX_CONNS asks for, or 0 for the default.
func (c *config) maxConns() (int, error) {
	n := c.MaxConns
	if n == 0 {
		if v := os.Getenv("LOUPE_MAX_CONNS"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil {
				return 0, fmt.Errorf("LOUPE_MAX_CONNS %q: want a number of connections", v)
			}
		}
	}
	if n != 0 && (n < minMaxConns || n > 10000) {
		return 0, fmt.Errorf("--max-conns %d: want %d to 10000 (a run's writes, its lease, River and the requests share the pool)", n, minMaxConns)
	}
	return n, nil
}

// logger builds the slog logger the configuration asks for.
func (c *config) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL %q: want debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var base slog.Handler
	switch strings.ToLower(c.LogFormat) {
	case "text", "":
		base = slog.NewTextHandler(os.Stderr, opts)
	case "json":
		base = slog.NewJSONHandler(os.Stderr, opts)
	default:
		return nil, fmt.Errorf("LOG_FORMAT %q: want text or json", c.LogFormat)
	}
	c.outages.init(base)
	return slog.New(&outageLog{next: base, state: &c.outages}), nil
}

// nopLogger discards logs, for commands whose output is their result.
func nopLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// defaultDataDir is the data directory's name when none is given.
const defaultDataDir = ".devui"

// dataDir is the data directory of this command's embedded cluster. serve and db start create a
// cluster where none is. Every other command uses an existing one, so that a command run from
// the wrong directory says so instead of starting a new, empty cluster there: the directory given
// by --data-dir or LOUPE_DATA_DIR, or else the nearest .devui found from the working directory
// up, the way git finds .git.
func (c *config) dataDir() (string, error) {
	if c.mayCreate {
		return c.DataDir, nil
	}
	if c.dataDirGiven || c.DataDir != defaultDataDir {
		if hasCluster(c.DataDir) {
			return c.DataDir, nil
		}
		return "", fmt.Errorf("no Loupe database in %s: start one there with `serve`, or point --data-dir (LOUPE_DATA_DIR) or DATABASE_URL at yours", c.DataDir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return findDataDir(wd)
}

// findDataDir returns the nearest .devui holding a cluster, from wd up.
func findDataDir(wd string) (string, error) {
	for dir := wd; ; {
		if candidate := filepath.Join(dir, defaultDataDir); hasCluster(candidate) {
			return candidate, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no Loupe database found: no %s in %s or any directory above it; start one with `serve` in your project's directory, or set --data-dir (LOUPE_DATA_DIR) or DATABASE_URL", defaultDataDir, wd)
		}
		dir = parent
	}
}

// hasCluster reports whether dir holds an embedded cluster.
func hasCluster(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "postgres", "PG_VERSION"))
	return err == nil
}
