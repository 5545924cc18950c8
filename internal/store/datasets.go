package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Dataset is a named, versioned set of examples. Every change makes a new version; an experiment
// names the version it ran.
type Dataset struct {
	ID          uuid.UUID `db:"id" json:"id"`
	Name        string    `db:"name" json:"name"`
	Description string    `db:"description" json:"description"`
	Version     int       `db:"version" json:"version"`
	CreatedBy   *string   `db:"created_by" json:"created_by,omitempty"`
	CreatedAt   time.Time `db:"created_at" json:"created_at"`
	UpdatedAt   time.Time `db:"updated_at" json:"updated_at"`
	// Examples is the number of examples in the current version (DatasetList, DatasetGet).
	Examples int `db:"examples" json:"examples"`
}

const datasetColumns = `id, name, description, version, created_by, created_at, updated_at,
	(SELECT count(*) FROM dataset_examples e WHERE e.dataset_id = datasets.id AND e.removed_in IS NULL)::int AS examples`

// Example is one example of a dataset version. Key stays the same across the versions an edit
// makes; ID names this version of it.
type Example struct {
	ID          uuid.UUID       `db:"id" json:"id"`
	DatasetID   uuid.UUID       `db:"dataset_id" json:"dataset_id"`
	Key         uuid.UUID       `db:"key" json:"key"`
	AddedIn     int             `db:"added_in" json:"added_in"`
	RemovedIn   *int            `db:"removed_in" json:"removed_in,omitempty"`
	Input       json.RawMessage `db:"input" json:"input"`
	Reference   json.RawMessage `db:"reference" json:"reference,omitempty"`
	Tags        []string        `db:"tags" json:"tags"`
	SourceRunID *uuid.UUID      `db:"source_run_id" json:"source_run_id,omitempty"`
	CreatedBy   *string         `db:"created_by" json:"created_by,omitempty"`
	CreatedAt   time.Time       `db:"created_at" json:"created_at"`
}

const exampleColumns = `id, dataset_id, key, added_in, removed_in, input, reference, tags, source_run_id, created_by, created_at`

// ExampleParams is a new example, or the new content of an edited one.
type ExampleParams struct {
	Input       json.RawMessage
	Reference   json.RawMessage
	Tags        []string
	SourceRunID *uuid.UUID
}

// DatasetCreate inserts an empty dataset (version 0). A taken name is ErrConflict.
func (s *Store) DatasetCreate(ctx context.Context, name, description, by string) (*Dataset, error) {
	rows, err := s.db.Query(ctx, `INSERT INTO datasets (id, name, description, created_by) VALUES ($1, $2, $3, NULLIF($4, ''))
		RETURNING `+datasetColumns, NewID(), name, description, by)
	if err != nil {
		return nil, fmt.Errorf("create dataset %q: %w", name, err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Dataset])
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return nil, fmt.Errorf("create dataset %q: the name is taken: %w", name, ErrConflict)
		}
		return nil, fmt.Errorf("create dataset %q: %w", name, err)
	}
	return d, nil
}

// DatasetGet returns a dataset by name.
func (s *Store) DatasetGet(ctx context.Context, name string) (*Dataset, error) {
	rows, err := s.db.Query(ctx, `SELECT `+datasetColumns+` FROM datasets WHERE name = $1`, name)
	if err != nil {
		return nil, fmt.Errorf("get dataset %q: %w", name, err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Dataset])
	if err != nil {
		return nil, fmt.Errorf("get dataset %q: %w", name, notFound(err))
	}
	return d, nil
}

// DatasetGetByID returns a dataset by id.
func (s *Store) DatasetGetByID(ctx context.Context, id uuid.UUID) (*Dataset, error) {
	rows, err := s.db.Query(ctx, `SELECT `+datasetColumns+` FROM datasets WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get dataset %s: %w", id, err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Dataset])
	if err != nil {
		return nil, fmt.Errorf("get dataset %s: %w", id, notFound(err))
	}
	return d, nil
}

// DatasetList returns every dataset, by name.
func (s *Store) DatasetList(ctx context.Context) ([]*Dataset, error) {
	rows, err := s.db.Query(ctx, `SELECT `+datasetColumns+` FROM datasets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list datasets: %w", err)
	}
	ds, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Dataset])
	if err != nil {
		return nil, fmt.Errorf("list datasets: %w", err)
	}
	return ds, nil
}

// DatasetDelete deletes a dataset, its examples and its experiments.
func (s *Store) DatasetDelete(ctx context.Context, id uuid.UUID) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM datasets WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete dataset %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete dataset %s: %w", id, ErrNotFound)
	}
	return nil
}

// DatasetChange is one change of a dataset's examples, applied as one new version.
type DatasetChange struct {
	Add    []ExampleParams
	Edit   map[uuid.UUID]ExampleParams // by example key
	Delete []uuid.UUID                 // example keys
	By     string
}

// DatasetApply applies a change as the dataset's next version, in one transaction, and returns the
// new version. An edited or deleted key that is not in the current version is ErrNotFound; an empty
// change makes no version.
func (s *Store) DatasetApply(ctx context.Context, id uuid.UUID, c DatasetChange) (int, error) {
	var version int
	err := s.WithTx(ctx, func(tx *Store) error {
		if err := tx.db.QueryRow(ctx, `SELECT version FROM datasets WHERE id = $1 FOR UPDATE`, id).Scan(&version); err != nil {
			return fmt.Errorf("change dataset %s: %w", id, notFound(err))
		}
		if len(c.Add) == 0 && len(c.Edit) == 0 && len(c.Delete) == 0 {
			return nil
		}
		version++
		gone := append([]uuid.UUID{}, c.Delete...)
		for key := range c.Edit {
			gone = append(gone, key)
		}
		if len(gone) > 0 {
			tag, err := tx.db.Exec(ctx, `UPDATE dataset_examples SET removed_in = $2
				WHERE dataset_id = $1 AND key = ANY($3) AND removed_in IS NULL`, id, version, gone)
			if err != nil {
				return fmt.Errorf("change dataset %s: %w", id, err)
			}
			if int(tag.RowsAffected()) != len(gone) {
				return fmt.Errorf("change dataset %s: an example edited or deleted is not in version %d: %w", id, version-1, ErrNotFound)
			}
		}
		rows := make([][]any, 0, len(c.Add)+len(c.Edit))
		add := func(key uuid.UUID, p ExampleParams) {
			tags := p.Tags
			if tags == nil {
				tags = []string{}
			}
			var by any
			if c.By != "" {
				by = c.By
			}
			rows = append(rows, []any{NewID(), id, key, version, p.Input, nullJSON(p.Reference), tags, p.SourceRunID, by})
		}
		for _, p := range c.Add {
			add(NewID(), p)
		}
		for key, p := range c.Edit {
			add(key, p)
		}
		if _, err := tx.db.CopyFrom(ctx, pgx.Identifier{"dataset_examples"},
			[]string{"id", "dataset_id", "key", "added_in", "input", "reference", "tags", "source_run_id", "created_by"},
			pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("change dataset %s: add examples: %w", id, err)
		}
		if _, err := tx.db.Exec(ctx, `UPDATE datasets SET version = $2, updated_at = now() WHERE id = $1`, id, version); err != nil {
			return fmt.Errorf("change dataset %s: %w", id, err)
		}
		return nil
	})
	return version, err
}

// ExampleList returns the examples of one version of a dataset, oldest first.
func (s *Store) ExampleList(ctx context.Context, datasetID uuid.UUID, version int) ([]*Example, error) {
	rows, err := s.db.Query(ctx, `SELECT `+exampleColumns+` FROM dataset_examples
		WHERE dataset_id = $1 AND added_in <= $2 AND (removed_in IS NULL OR removed_in > $2)
		ORDER BY key`, datasetID, version)
	if err != nil {
		return nil, fmt.Errorf("list examples of dataset %s v%d: %w", datasetID, version, err)
	}
	es, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Example])
	if err != nil {
		return nil, fmt.Errorf("list examples of dataset %s v%d: %w", datasetID, version, err)
	}
	return es, nil
}

// ExampleGet returns one example (any version of it) by id.
func (s *Store) ExampleGet(ctx context.Context, id uuid.UUID) (*Example, error) {
	rows, err := s.db.Query(ctx, `SELECT `+exampleColumns+` FROM dataset_examples WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get example %s: %w", id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Example])
	if err != nil {
		return nil, fmt.Errorf("get example %s: %w", id, notFound(err))
	}
	return e, nil
}
