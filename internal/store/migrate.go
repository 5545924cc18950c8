package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/loupe-dev/loupe/migrations"
)

// MigrationStatus says how far the database's schema is from the embedded migrations.
type MigrationStatus struct {
	Current int64 // the newest applied version, 0 for none
	Latest  int64 // the newest embedded version
}

// UpToDate reports whether every embedded migration is applied.
func (m MigrationStatus) UpToDate() bool { return m.Current >= m.Latest }

// migrationLockID is the PostgreSQL advisory lock that Migrate and MigrateDown hold for as long
// as they change the schema, so that processes started together on a fresh database (two replicas,
// a serve and `devui migrate`) apply each migration once, one after the other, instead of racing
// on the same CREATE TYPE. River's tables are created by migrations of the same set, so they run
// under it too. It is Loupe's own, not goose's default, so that another goose user of the same
// database never waits on Loupe's.
const migrationLockID int64 = 0x6c6f757065 // "loupe"

func newProvider(pool *pgxpool.Pool) (*goose.Provider, func() error, error) {
	// The lock is tried every second, for ten minutes: long enough for another process's
	// migrations on a large database, short enough that a hung one is reported.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 600))
	if err != nil {
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("load migrations: %w", err), db.Close())
	}
	return p, db.Close, nil
}

// Migrate applies every pending migration and returns the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (_ []int64, err error) {
	p, closeDB, err := newProvider(pool)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// MigrateDown rolls back the newest migration.
func MigrateDown(ctx context.Context, pool *pgxpool.Pool) (err error) {
	p, closeDB, err := newProvider(pool)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	if _, err := p.Down(ctx); err != nil {
		return fmt.Errorf("roll back migration: %w", err)
	}
	return nil
}

// MigrateDownTo rolls back the migrations newer than version.
func MigrateDownTo(ctx context.Context, pool *pgxpool.Pool, version int64) (err error) {
	p, closeDB, err := newProvider(pool)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("roll back migrations to %d: %w", version, err)
	}
	return nil
}

// Migrations reports the applied and the latest embedded migration versions.
func Migrations(ctx context.Context, pool *pgxpool.Pool) (_ MigrationStatus, err error) {
	p, closeDB, err := newProvider(pool)
	if err != nil {
		return MigrationStatus{}, err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("read migration version: %w", err)
	}
	sources := p.ListSources()
	var latest int64
	if len(sources) > 0 {
		latest = sources[len(sources)-1].Version
	}
	return MigrationStatus{Current: current, Latest: latest}, nil
}
