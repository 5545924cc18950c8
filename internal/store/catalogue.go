package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CatalogueAction is one action as a program announced it in the catalogue.
type CatalogueAction struct {
	Key     string `db:"key" json:"key"`
	Program string `db:"program" json:"program"`
	// Queue is the River queue the program's workers work.
	Queue string `db:"queue" json:"queue"`
	// Description is the action's engine.ActionDesc as JSON, schemas included.
	Description json.RawMessage `db:"description" json:"description"`
	SeenAt      time.Time       `db:"seen_at" json:"seen_at"`
	// Live says that a process of the program announced the action within its TTL and has not
	// stopped since.
	Live bool `db:"live" json:"live"`
}

// CatalogueEntry is one action a process announces: its key and its description as JSON.
type CatalogueEntry struct {
	Key         string          `json:"key"`
	Description json.RawMessage `json:"description"`
}

// CatalogueAnnounceParams is a process's announcement of the actions it executes.
type CatalogueAnnounceParams struct {
	// Instance names the process; its entry is replaced by each announcement.
	Instance string
	Program  string
	// Queue is the River queue the process works.
	Queue   string
	Actions []CatalogueEntry
	// TTL is how long the announcement stays live without another.
	TTL time.Duration
	// HeldQueue is the queue no process works, where jobs of actions no live program has wait;
	// QueuePrefix starts the name of every program's queue. Waiting jobs of the announced actions
	// in HeldQueue, or in a program queue that no live process works, move into Queue.
	HeldQueue   string
	QueuePrefix string
}

// catalogueLive is the SQL condition that a catalogue row `a` is live.
const catalogueLive = `(a.expires_at > now() AND EXISTS (SELECT 1 FROM action_catalogue_workers w
	WHERE w.program = a.program AND w.expires_at > now()))`

// CatalogueAnnounce records a process and its actions, and moves the waiting jobs of those actions
// into its queue, in one transaction. It returns how many jobs moved.
func (s *Store) CatalogueAnnounce(ctx context.Context, p CatalogueAnnounceParams) (int64, error) {
	actions := p.Actions
	if actions == nil {
		actions = []CatalogueEntry{}
	}
	list, err := json.Marshal(actions)
	if err != nil {
		return 0, fmt.Errorf("announce actions of %s: %w", p.Program, err)
	}
	keys := make([]string, len(actions))
	for i, a := range actions {
		keys[i] = a.Key
	}
	var moved int64
	err = s.WithTx(ctx, func(tx *Store) error {
		// The action rows are shared by every process of the program. One that froze (SIGSTOP, a
		// stalled VM) inside this transaction holds their locks until it runs again: waiting for
		// it would stall this process's start. After catalogueLockTimeout the announcement is
		// given up for this round (ErrCatalogueBusy); the rows are the same program's anyway.
		if _, err := tx.db.Exec(ctx, `SET LOCAL lock_timeout = '`+catalogueLockTimeout+`'`); err != nil {
			return fmt.Errorf("announce actions of %s: %w", p.Program, err)
		}
		if _, err := tx.db.Exec(ctx, `INSERT INTO action_catalogue (key, program, queue, description, expires_at)
			SELECT e->>'key', $1, $2, e->'description', now() + $3::interval FROM jsonb_array_elements($4::jsonb) e
			ON CONFLICT (key, program) DO UPDATE SET queue = excluded.queue, description = excluded.description,
				seen_at = now(), expires_at = excluded.expires_at`, p.Program, p.Queue, p.TTL, list); err != nil {
			return fmt.Errorf("announce actions of %s: %w", p.Program, err)
		}
		// Processes that died without removing their entry are kept a day, for the runs page.
		if _, err := tx.db.Exec(ctx, `DELETE FROM action_catalogue_workers WHERE expires_at < now() - interval '1 day'`); err != nil {
			return fmt.Errorf("forget dead workers: %w", err)
		}
		if len(keys) == 0 {
			return nil
		}
		// River has no API to change a job's queue; a waiting job is only a row, and a producer
		// fetches it from its new queue on its next poll.
		tag, err := tx.db.Exec(ctx, `UPDATE river_job j SET queue = $1
			WHERE j.kind = 'loupe.run' AND j.state IN ('available', 'scheduled', 'retryable') AND j.queue <> $1
				AND (j.queue = $2 OR starts_with(j.queue, $3) AND NOT EXISTS (SELECT 1 FROM action_catalogue_workers w
					WHERE w.queue = j.queue AND w.expires_at > now()))
				AND EXISTS (SELECT 1 FROM runs r WHERE r.id = (j.args->>'run_id')::uuid AND r.action = ANY($4))`,
			p.Queue, p.HeldQueue, p.QueuePrefix, keys)
		if err != nil {
			return fmt.Errorf("move waiting jobs to queue %s: %w", p.Queue, err)
		}
		moved = tag.RowsAffected()
		return nil
	})
	var pgErr *pgconn.PgError
	busy := errors.As(err, &pgErr) && pgErr.Code == "55P03" // lock_not_available
	if err != nil && !busy {
		return 0, err
	}
	// The process's own row, on its own: nobody else writes it, so a lock held elsewhere never
	// keeps the process from saying that it is alive.
	if _, err := s.db.Exec(ctx, `INSERT INTO action_catalogue_workers (instance, program, queue, expires_at)
		VALUES ($1, $2, $3, now() + $4::interval)
		ON CONFLICT (instance) DO UPDATE SET program = excluded.program, queue = excluded.queue,
			seen_at = now(), expires_at = excluded.expires_at`, p.Instance, p.Program, p.Queue, p.TTL); err != nil {
		return 0, fmt.Errorf("announce worker %s: %w", p.Instance, err)
	}
	if busy {
		return 0, fmt.Errorf("%w: %w", ErrCatalogueBusy, err)
	}
	return moved, nil
}

// catalogueLockTimeout bounds the wait for the catalogue's shared rows.
const catalogueLockTimeout = "2s"

// ErrCatalogueBusy says that the catalogue's rows of the program were held by another process of
// it for longer than catalogueLockTimeout: the process's own entry was written, its actions' rows
// were not refreshed this time.
var ErrCatalogueBusy = errors.New("the catalogue's rows of this program are held by another of its processes")

// CatalogueRemove removes a process's entry: its actions are no longer live unless another process
// of its program announces them.
func (s *Store) CatalogueRemove(ctx context.Context, instance string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM action_catalogue_workers WHERE instance = $1`, instance); err != nil {
		return fmt.Errorf("remove worker %s from the catalogue: %w", instance, err)
	}
	return nil
}

// CatalogueActionListParams selects catalogue rows.
type CatalogueActionListParams struct {
	// Keys limits the list to these actions; nil lists all.
	Keys []string
	// LiveOnly leaves out actions no live process announces.
	LiveOnly bool
}

// CatalogueActionList returns the catalogue's actions by key, and for each key the live programs
// first, most recently seen first.
func (s *Store) CatalogueActionList(ctx context.Context, p CatalogueActionListParams) ([]*CatalogueAction, error) {
	rows, err := s.db.Query(ctx, `SELECT * FROM (SELECT a.key, a.program, a.queue, a.description, a.seen_at, `+catalogueLive+` AS live
		FROM action_catalogue a WHERE $1::text[] IS NULL OR a.key = ANY($1)) c
		WHERE live OR NOT $2 ORDER BY key, live DESC, seen_at DESC`, p.Keys, p.LiveOnly)
	if err != nil {
		return nil, fmt.Errorf("list catalogue: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[CatalogueAction])
	if err != nil {
		return nil, fmt.Errorf("list catalogue: %w", err)
	}
	return list, nil
}

// CatalogueActionGet returns the action's best catalogue row: a live program's, else the one seen
// last. An action no program ever announced is ErrNotFound.
func (s *Store) CatalogueActionGet(ctx context.Context, key string) (*CatalogueAction, error) {
	list, err := s.CatalogueActionList(ctx, CatalogueActionListParams{Keys: []string{key}})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("action %s in the catalogue: %w", key, ErrNotFound)
	}
	return list[0], nil
}
