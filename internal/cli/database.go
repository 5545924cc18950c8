package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loupe-dev/loupe/internal/pgcluster"
	"github.com/loupe-dev/loupe/internal/server"
	"github.com/loupe-dev/loupe/internal/store"
)

// database is an open pool plus whatever must be stopped with it (the embedded cluster, which
// restarts PostgreSQL should it die: pgcluster's supervise.go).
type database struct {
	pool *pgxpool.Pool
	// reads is the read replica's pool (--read-database-url), or nil.
	reads   *pgxpool.Pool
	cluster *pgcluster.Cluster
	url     string // what the pool connects to, for programs devui start runs
}

// openDatabase connects to DATABASE_URL, or starts the embedded cluster when it is empty.
func openDatabase(ctx context.Context, cfg *config, log *slog.Logger) (*database, error) {
	maxConns, err := cfg.maxConns()
	if err != nil {
		return nil, err
	}
	db := &database{}
	dsn := cfg.DatabaseURL
	if dsn == "" {
		dir, err := cfg.dataDir()
		if err != nil {
			return nil, err
		}
		cluster, err := pgcluster.New(pgcluster.Config{DataDir: dir, Logger: log.With("component", "pgcluster")})
		if err != nil {
			return nil, err
		}
		cfg.outages.watch(cluster)
		if err := cluster.Start(ctx); err != nil {
			return nil, err
		}
		db.cluster = cluster
		dsn = cluster.URL()
	} else {
		log.Info("using DATABASE_URL", "url", redactURL(dsn))
	}
	db.url = dsn
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		db.close()
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		pcfg.MaxConns = int32(maxConns)
	} else {
		pcfg.MaxConns = max(pcfg.MaxConns, defaultMaxConns)
	}
	pcfg.MinConns = min(pcfg.MinConns, pcfg.MaxConns)
	store.SessionDefaults(pcfg.ConnConfig)
	// Queries that succeed end an outage that the logs saw begin (outagelog.go).
	pcfg.ConnConfig.Tracer = &cfg.outages
	pcfg.HealthCheckPeriod = 5 * time.Second
	if cluster := db.cluster; cluster != nil {
		// A restart keeps the port unless it was taken meanwhile; new connections follow it.
		pcfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
			cc.Port = uint16(cluster.Port())
			return nil
		}
	}
	db.pool, err = pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		db.close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	if cfg.ReadDatabaseURL != "" {
		if db.reads, err = openReadReplica(ctx, cfg.ReadDatabaseURL, log); err != nil {
			db.close()
			return nil, err
		}
	}
	return db, nil
}

// openReadReplica connects to the read replica and checks that it is one of this database: in
// recovery (a standby) and holding Loupe's tables, so that a wrong URL is an error at start, not
// empty pages.
func openReadReplica(ctx context.Context, dsn string, log *slog.Logger) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("--read-database-url: %w", err)
	}
	pcfg.MaxConns = max(pcfg.MaxConns, defaultMaxConns)
	pcfg.HealthCheckPeriod = 5 * time.Second
	// Reads only: a write sent here by mistake fails at once instead of waiting on a standby.
	pcfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	store.SessionDefaults(pcfg.ConnConfig)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("--read-database-url: %w", err)
	}
	var standby, hasTraces bool
	err = pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), to_regclass('traces') IS NOT NULL`).Scan(&standby, &hasTraces)
	switch {
	case err != nil:
		pool.Close()
		return nil, fmt.Errorf("--read-database-url %s: %w", redactURL(dsn), err)
	case !hasTraces:
		pool.Close()
		return nil, fmt.Errorf("--read-database-url %s: no Loupe tables there: it must be a replica of the database Loupe writes to", redactURL(dsn))
	case !standby:
		log.Warn("--read-database-url is not a standby (pg_is_in_recovery is false): reads go there all the same", "url", redactURL(dsn))
	default:
		log.Info("reading traces and lists from a read replica", "url", redactURL(dsn))
	}
	return pool, nil
}

// migrate applies pending migrations and logs what it did.
func (db *database) migrate(ctx context.Context, log *slog.Logger) error {
	applied, err := store.Migrate(ctx, db.pool)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		log.Info("applied migrations", "versions", applied)
	}
	return nil
}

// monitor is what the server asks about outages: the embedded cluster's supervisor, or nothing
// for DATABASE_URL (the server then goes by what its queries and pings see).
func (db *database) monitor() server.DatabaseMonitor {
	if db.cluster == nil {
		return nil
	}
	return db.cluster
}

// wait blocks until ctx ends (SIGINT or SIGTERM), which is no error, or until the embedded
// cluster died and could not be restarted, which is.
func (db *database) wait(ctx context.Context) error {
	var failed <-chan error // nil for DATABASE_URL: nothing to report
	if db.cluster != nil {
		failed = db.cluster.Failed()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

func (db *database) close() {
	if db.reads != nil {
		db.reads.Close()
	}
	if db.pool != nil {
		db.pool.Close()
	}
	if db.cluster != nil {
		db.cluster.Stop()
	}
}

// redactURL hides the password of a connection string for logs.
func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// withDatabase opens the database for a one-shot command, applies pending migrations unless
// migrate is false, runs fn, and closes the database (stopping the embedded cluster if this
// command started it).
func withDatabase(ctx context.Context, cfg *config, migrate bool, fn func(db *database, log *slog.Logger) error) error {
	log, err := cfg.logger()
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.close()
	if migrate {
		if err := db.migrate(ctx, log); err != nil {
			return err
		}
	}
	return fn(db, log)
}
