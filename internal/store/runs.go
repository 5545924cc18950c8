package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loupe-dev/loupe/internal/pricing"
)

// Run statuses, as in DESIGN.md's contract.
const (
	RunQueued      = "queued"
	RunRunning     = "running"
	RunInterrupted = "interrupted"
	RunSucceeded   = "succeeded"
	RunFailed      = "failed"
	RunAborted     = "aborted"
	RunCancelled   = "cancelled"
)

// RunStatuses lists every run status in lifecycle order.
var RunStatuses = []string{RunQueued, RunRunning, RunInterrupted, RunSucceeded, RunFailed, RunAborted, RunCancelled}

// FinishedRunStatuses are the statuses of a run that is over. An interrupted run is not: it
// waits for a reviewer.
var FinishedRunStatuses = []string{RunSucceeded, RunFailed, RunAborted, RunCancelled}

// RunFinished reports whether a run with this status is over.
func RunFinished(status string) bool { return slices.Contains(FinishedRunStatuses, status) }

// Run is one execution of a registered action.
type Run struct {
	ID           uuid.UUID       `db:"id" json:"id"`
	Action       string          `db:"action" json:"action"`
	Input        json.RawMessage `db:"input" json:"input"`
	Status       string          `db:"status" json:"status"`
	Output       json.RawMessage `db:"output" json:"output,omitempty"`
	Error        json.RawMessage `db:"error" json:"error,omitempty"`
	TraceID      *string         `db:"trace_id" json:"trace_id,omitempty"`
	Model        *string         `db:"model" json:"model,omitempty"`
	Turns        int             `db:"turns" json:"turns"`
	InputTokens  int64           `db:"input_tokens" json:"input_tokens"`
	OutputTokens int64           `db:"output_tokens" json:"output_tokens"`
	ReplayOf     *uuid.UUID      `db:"replay_of" json:"replay_of,omitempty"`
	ReplayMode   *string         `db:"replay_mode" json:"replay_mode,omitempty"`
	ForkOf       *uuid.UUID      `db:"fork_of" json:"fork_of,omitempty"`
	ForkTurn     *int            `db:"fork_turn" json:"fork_turn,omitempty"`
	CreatedBy    *string         `db:"created_by" json:"created_by,omitempty"`
	CreatedAt    time.Time       `db:"created_at" json:"created_at"`
	StartedAt    *time.Time      `db:"started_at" json:"started_at,omitempty"`
	FinishedAt   *time.Time      `db:"finished_at" json:"finished_at,omitempty"`
	UpdatedAt    time.Time       `db:"updated_at" json:"updated_at"`
	Version      int64           `db:"version" json:"version"`
	LeaseOwner   *string         `db:"lease_owner" json:"-"`
	LeaseExpires *time.Time      `db:"lease_expires_at" json:"-"`
	// LeaseEpoch counts the acquisitions of the run's lease: the fence of the execution that
	// holds it (see Fence).
	LeaseEpoch   int64   `db:"lease_epoch" json:"-"`
	Resumes      int     `db:"resumes" json:"resumes"`
	ResumeSpanID *string `db:"resume_span_id" json:"-"`
	// WaitedMs is how long the run waited for reviewers in its finished waits (an interrupted
	// run's current wait is since UpdatedAt).
	WaitedMs int64 `db:"waited_ms" json:"waited_ms"`
	// Labels are extra attributes of the run's root span (Genkit's telemetryLabels).
	Labels map[string]string `db:"labels" json:"labels,omitempty"`
	// Context is the run's action context (Genkit's runAction context: auth and the like), a JSON
	// object, or nil.
	Context json.RawMessage `db:"context" json:"context,omitempty"`
	// Usage is the run's tokens per model called (nil before its first model call): what its cost
	// is priced from (pricing.Table.Cost).
	Usage map[string]pricing.Tokens `db:"usage" json:"usage,omitempty"`
	// TookOver is set by RunAcquire when the run was running under another execution's lease
	// (lapsed): that execution died or stopped answering, rather than ending at an interrupt or
	// a cancellation. It is not stored.
	TookOver bool `db:"-" json:"-"`
}

const runColumns = `id, action, input, status, output, error, trace_id, model, turns, input_tokens,
	output_tokens, replay_of, replay_mode, fork_of, fork_turn, created_by, created_at, started_at,
	finished_at, updated_at, version, lease_owner, lease_expires_at, lease_epoch, resumes, resume_span_id, waited_ms, labels, context, usage`

// RunCreateParams describes a new run.
type RunCreateParams struct {
	Action     string
	Input      json.RawMessage
	CreatedBy  string
	ReplayOf   *uuid.UUID
	ReplayMode string
	ForkOf     *uuid.UUID
	ForkTurn   *int
	Labels     map[string]string
	// Context is the run's action context, a JSON object; nil or JSON null stores none.
	Context json.RawMessage
}

// labelsJSON is a run's labels as stored: NULL when there are none.
func labelsJSON(labels map[string]string) any {
	if len(labels) == 0 {
		return nil
	}
	return labels
}

// RunCreate inserts a queued run.
func (s *Store) RunCreate(ctx context.Context, p RunCreateParams) (*Run, error) {
	input := p.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	rows, err := s.db.Query(ctx, `
		INSERT INTO runs (id, action, input, created_by, replay_of, replay_mode, fork_of, fork_turn, labels, context)
		VALUES ($1, $2, $3, NULLIF($4, ''), $5, NULLIF($6, ''), $7, $8, $9, NULLIF($10::jsonb, 'null'::jsonb))
		RETURNING `+runColumns,
		NewID(), p.Action, input, p.CreatedBy, p.ReplayOf, p.ReplayMode, p.ForkOf, p.ForkTurn, labelsJSON(p.Labels), nullJSON(p.Context))
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Run])
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	return run, nil
}

// RunGet returns one run.
func (s *Store) RunGet(ctx context.Context, id uuid.UUID) (*Run, error) {
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Run])
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, notFound(err))
	}
	return run, nil
}

// RunSort is an order of the runs list. Every order breaks ties by id, so that keyset paging is
// exact.
type RunSort string

// Runs-list orders.
const (
	RunSortStarted RunSort = "started" // created_at: the default, newest first
	RunSortTokens  RunSort = "tokens"  // input and output tokens
	RunSortTurns   RunSort = "turns"
	RunSortRanFor  RunSort = "ran"    // time the run ran, its waits for reviewers left out
	RunSortWaited  RunSort = "waited" // time it waited for reviewers, a current wait included
	RunSortAction  RunSort = "action"
	RunSortStatus  RunSort = "status"
	RunSortModel   RunSort = "model"
	// RunSortID is the run's id: a UUIDv7, so the order of creation to the millisecond, read from
	// the primary key.
	RunSortID RunSort = "id"
	// RunSortInput is the input's JSON text (PostgreSQL's, keys in jsonb's order), compared on its
	// first 200 characters: the cursor carries the sort value, and an input may be megabytes.
	// Inputs that share those 200 characters are in id order.
	RunSortInput RunSort = "input"
	// RunSortPending is the number of the run's interrupts that wait for a reviewer.
	RunSortPending RunSort = "pending"
	// RunSortCost is the run's cost by RunListParams.Prices; a run whose cost is unknown (a model
	// without a price) sorts below every priced run. The cost is computed per run when listed (it
	// follows the price table in force), so this order reads every run the filters keep.
	RunSortCost RunSort = "cost"
)

// RunSorts are the orders the runs list accepts.
var RunSorts = []RunSort{RunSortStarted, RunSortTokens, RunSortTurns, RunSortRanFor, RunSortWaited, RunSortAction, RunSortStatus, RunSortModel,
	RunSortID, RunSortInput, RunSortPending, RunSortCost}

// runSortKeys are each order's SQL expression and the type its cursor value is cast to.
var runSortKeys = map[RunSort]struct{ expr, typ string }{
	RunSortStarted: {"created_at", "timestamptz"},
	RunSortTokens:  {"(input_tokens + output_tokens)", "bigint"},
	RunSortTurns:   {"turns", "int"},
	RunSortRanFor:  {ranForSQL, "bigint"},
	RunSortWaited:  {waitedSQL, "bigint"},
	RunSortAction:  {"action", "text"},
	RunSortStatus:  {"status", "text"},
	RunSortModel:   {"coalesce(model, '')", "text"},
	RunSortID:      {"id", "uuid"},
	RunSortInput:   {"left(input::text, 200)", "text"},
	RunSortPending: {pendingSQL, "bigint"},
	RunSortCost:    {"", "numeric"}, // costSQL, with the prices as arguments
}

// costSQL is a run's cost in USD by a price table (the arguments its entries are in: keys, input
// and output prices per million tokens, most specific key first), as pricing.Table.Cost computes
// it, or -1 when a model it called has no price. A model's name is matched as pricing.Match does,
// then without a provider's prefix; numeric, so that a cursor's value compares exactly.
func costSQL(keys, ins, outs string) string {
	return `coalesce((SELECT CASE WHEN count(*) = count(p.input) THEN coalesce(sum(
			(u.value->>'input')::numeric * p.input + (u.value->>'output')::numeric * p.output), 0) / 1000000 END
		FROM jsonb_each(runs.usage) u
		LEFT JOIN LATERAL (SELECT pr.input, pr.output
			FROM unnest(` + keys + `::text[], ` + ins + `::text[]::numeric[], ` + outs + `::text[]::numeric[]) WITH ORDINALITY AS pr(key, input, output, rank),
				unnest(ARRAY[lower(u.key), lower(regexp_replace(u.key, '^.*/', ''))]) WITH ORDINALITY AS nm(name, pass)
			WHERE CASE WHEN right(pr.key, 1) = '*' THEN starts_with(nm.name, rtrim(pr.key, '*'))
				ELSE nm.name = pr.key OR starts_with(nm.name, pr.key) AND substr(nm.name, length(pr.key) + 1) ~ '` + pricing.VersionSuffixPattern + `' END
			ORDER BY nm.pass, pr.rank LIMIT 1) p ON true), -1)`
}

// pendingSQL is the number of a run's pending interrupts (interrupts_run_idx finds them).
const pendingSQL = `(SELECT count(*) FROM interrupts i WHERE i.run_id = runs.id AND i.status = 'pending')`

// ranForSQL is a run's running time in whole ms: from its start to its end (now while it runs, the
// start of its wait while it waits), less its finished waits. It is truncated, as the runs list
// shows it: rounded, two runs 45.4 and 45.6 ms long would tie at 46 and could be listed 46, 45 in
// ascending order.
const ranForSQL = `(CASE WHEN started_at IS NULL THEN 0 ELSE greatest(floor(extract(epoch FROM (CASE
	WHEN finished_at IS NOT NULL THEN finished_at WHEN status = 'interrupted' THEN updated_at ELSE now() END)
	- started_at) * 1000)::bigint - waited_ms, 0) END)`

// waitedSQL is a run's time waiting for reviewers in whole ms, a current wait included (truncated,
// as ranForSQL).
const waitedSQL = `(waited_ms + CASE WHEN status = 'interrupted'
	THEN greatest(floor(extract(epoch FROM now() - updated_at) * 1000)::bigint, 0) ELSE 0 END)`

// RunCursor is a keyset position in the runs list: the last row's sort value, in its text form,
// and id.
type RunCursor struct {
	Sort  RunSort
	Asc   bool
	Value string
	ID    uuid.UUID
}

// RunListParams filters and pages the runs list. Zero values mean "no filter".
type RunListParams struct {
	Status string
	Action string
	Model  string // the model the run used last, as the runs list shows it
	Query  string // text searched in the input, output, error, action and id
	Since  time.Time
	Until  time.Time
	After  *RunCursor // the last row of the previous page, in the same order
	Limit  int        // default 50, at most 500
	Sort   RunSort    // default RunSortStarted
	Asc    bool       // ascending; the default is descending
	// Session keeps the runs whose traces belong to this session (RunSessions), and Thread, when
	// set, to this thread of it.
	Session string
	Thread  string
	// Prices prices the runs for RunSortCost.
	Prices *pricing.Table
}

// RunList returns runs newest first, and the cursor of the next page (nil on the last page).
func (s *Store) RunList(ctx context.Context, p RunListParams) ([]*Run, *RunCursor, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Status != "" {
		where = append(where, "status = "+arg(p.Status))
	}
	if p.Action != "" {
		where = append(where, "action = "+arg(p.Action))
	}
	if p.Model != "" {
		where = append(where, "model = "+arg(p.Model))
	}
	if !p.Since.IsZero() {
		where = append(where, "created_at >= "+arg(p.Since))
	}
	if !p.Until.IsZero() {
		where = append(where, "created_at < "+arg(p.Until))
	}
	if p.Session != "" {
		cond := "t.session = " + arg(p.Session)
		if p.Thread != "" {
			cond += " AND t.thread = " + arg(p.Thread)
		}
		where = append(where, "EXISTS (SELECT 1 FROM traces t WHERE t.run_id = runs.id AND "+cond+")")
	}
	if p.Query != "" {
		pattern := "%" + escapeLike(p.Query) + "%"
		ph := arg(pattern)
		where = append(where, "(input::text ILIKE "+ph+" OR coalesce(output::text, '') ILIKE "+ph+
			" OR coalesce(error::text, '') ILIKE "+ph+" OR action ILIKE "+ph+" OR id::text LIKE lower("+ph+"))")
	}
	if p.Sort == "" {
		p.Sort = RunSortStarted
	}
	key, ok := runSortKeys[p.Sort]
	if !ok {
		return nil, nil, fmt.Errorf("list runs: no order %q", p.Sort)
	}
	if p.Sort == RunSortCost {
		entries := p.Prices.Entries()
		// Prices go as text, so that 0.15 is the numeric 0.15 and not the nearest float.
		keys, ins, outs := make([]string, len(entries)), make([]string, len(entries)), make([]string, len(entries))
		for i, e := range entries {
			keys[i] = e.Key
			ins[i] = strconv.FormatFloat(e.Price.Input, 'f', -1, 64)
			outs[i] = strconv.FormatFloat(e.Price.Output, 'f', -1, 64)
		}
		key.expr = costSQL(arg(keys), arg(ins), arg(outs))
	}
	cmp, dir := "<", "DESC"
	if p.Asc {
		cmp, dir = ">", "ASC"
	}
	if p.After != nil {
		if p.After.Sort != p.Sort || p.After.Asc != p.Asc {
			return nil, nil, fmt.Errorf("list runs: a cursor of order %s is used with order %s: %w", p.After.Sort, p.Sort, ErrBadCursor)
		}
		if err := checkCursorValue(key.typ, p.After.Value); err != nil {
			return nil, nil, fmt.Errorf("list runs: cursor value %q: %w: %w", p.After.Value, ErrBadCursor, err)
		}
		where = append(where, "("+key.expr+", id) "+cmp+" ("+arg(p.After.Value)+"::"+key.typ+", "+arg(p.After.ID)+")")
	}
	sql := `SELECT ` + runColumns + `, (` + key.expr + `)::text AS sort_value FROM runs`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY " + key.expr + " " + dir + ", id " + dir + " LIMIT " + arg(limit+1)
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	type sortedRun struct {
		Run
		SortValue string `db:"sort_value"`
	}
	sorted, err := pgx.CollectRows(rows, pgx.RowToStructByName[sortedRun])
	if err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	var next *RunCursor
	if len(sorted) > limit {
		sorted = sorted[:limit]
		last := sorted[limit-1]
		next = &RunCursor{Sort: p.Sort, Asc: p.Asc, Value: last.SortValue, ID: last.ID}
	}
	runs := make([]*Run, len(sorted))
	for i := range sorted {
		runs[i] = &sorted[i].Run
	}
	return runs, next, nil
}

// RunCountByStatus counts runs per status. Every status is present, with zero where none exist.
func (s *Store) RunCountByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT status, count(*) FROM runs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	counts := make(map[string]int64, len(RunStatuses))
	for _, st := range RunStatuses {
		counts[st] = 0
	}
	type row struct {
		Status string
		Count  int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	for _, r := range got {
		counts[r.Status] = r.Count
	}
	return counts, nil
}

// escapeLike escapes LIKE's wildcards so a search for "50%" finds that text.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// checkCursorValue refuses a cursor value that PostgreSQL could not cast to the order's type.
func checkCursorValue(typ, v string) error {
	switch typ {
	case "bigint":
		_, err := strconv.ParseInt(v, 10, 64)
		return err
	case "int":
		_, err := strconv.ParseInt(v, 10, 32)
		return err
	case "numeric":
		if !numericText.MatchString(v) {
			return errors.New("not a number")
		}
		return nil
	case "uuid":
		_, err := uuid.Parse(v)
		return err
	case "timestamptz":
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00"} {
			if _, err := time.Parse(layout, v); err == nil {
				return nil
			}
		}
		return errors.New("not a time")
	}
	return CheckText("cursor", v)
}

// numericText is a numeric's text form as PostgreSQL prints one.
var numericText = regexp.MustCompile(`^-?[0-9]{1,40}(\.[0-9]{1,100})?$`)

// ErrBadCursor is returned for a runs-list cursor that does not fit the list asked for.
var ErrBadCursor = errors.New("cursor does not fit this list")

// ErrLeaseHeld is returned when another live worker holds a run's lease.
var ErrLeaseHeld = errors.New("run is leased by another worker")

// ErrRunFinished is returned when a run is in a state that the operation cannot change.
var ErrRunFinished = errors.New("run is not active")

// FirstExecution reports whether an acquired run starts from nothing: it had never been executed
// (RunAcquire sets started_at only the first time, and to the same now() as updated_at) and is no
// fork, whose history is copied in before it runs.
func (r *Run) FirstExecution() bool {
	return r.StartedAt != nil && r.StartedAt.Equal(r.UpdatedAt) && r.Resumes == 0 && r.ForkOf == nil
}

// RunAcquire takes the execution lease of a queued or running run for owner, marking it running,
// and starts a new lease epoch: the returned run's LeaseEpoch is the new execution's fence, and
// every earlier execution's writes are refused from now on. A running run whose lease is held by
// a live worker is ErrLeaseHeld; a run in any other state is ErrRunFinished (the job has nothing
// to do).
func (s *Store) RunAcquire(ctx context.Context, id uuid.UUID, owner string, ttl time.Duration) (*Run, error) {
	// prev is the row as it was (locked, so that it is the row the update changes): a run that
	// was running is taken over from an execution that is gone.
	rows, err := s.db.Query(ctx, `UPDATE runs r SET status = 'running', started_at = coalesce(r.started_at, now()),
			lease_owner = $2, lease_expires_at = now() + $3::interval, lease_epoch = r.lease_epoch + 1,
			updated_at = now(), version = r.version + 1
		FROM (SELECT id, status AS prev_status FROM runs WHERE id = $1 FOR UPDATE) prev
		WHERE r.id = prev.id AND r.status IN ('queued', 'running')
			AND (r.lease_owner IS NULL OR r.lease_owner = $2 OR r.lease_expires_at < now())
		RETURNING `+qualified("r", runColumns)+`, prev.prev_status = 'running' AS took_over`, id, owner, ttl)
	if err != nil {
		return nil, fmt.Errorf("acquire run %s: %w", id, err)
	}
	type acquired struct {
		Run
		TookOver bool `db:"took_over"`
	}
	got, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[acquired])
	if err == nil {
		run := got.Run
		run.TookOver = got.TookOver
		return &run, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("acquire run %s: %w", id, err)
	}
	cur, err := s.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if cur.Status == RunRunning {
		return cur, fmt.Errorf("acquire run %s: %w", id, ErrLeaseHeld)
	}
	return cur, fmt.Errorf("acquire run %s (%s): %w", id, cur.Status, ErrRunFinished)
}

// RunRenewLease extends the lease of the execution fenced by f and returns the run's status, so
// that the executor notices a cancellation. A lease taken over by another execution is
// ErrLeaseLost.
func (s *Store) RunRenewLease(ctx context.Context, f Fence, ttl time.Duration) (string, error) {
	var status string
	var held bool
	err := s.db.QueryRow(ctx, `WITH renewed AS (
			UPDATE runs SET lease_expires_at = now() + $3::interval
			WHERE id = $1 AND lease_epoch = $2 AND status = 'running' RETURNING status)
		SELECT r.status, r.lease_epoch = $2 OR EXISTS (SELECT 1 FROM renewed) FROM runs r WHERE r.id = $1`,
		f.RunID, f.Epoch, ttl).Scan(&status, &held)
	if err != nil {
		return "", fmt.Errorf("renew lease of run %s: %w", f.RunID, notFound(err))
	}
	if !held {
		return status, fmt.Errorf("renew lease of run %s: %w", f.RunID, ErrLeaseLost)
	}
	return status, nil
}

// RunProgressParams records what a run has done so far. Its token usage is not a parameter: it is
// always summed from the model-call ledger, so a run taken over after a crash reports what a clean
// run reports.
type RunProgressParams struct {
	ID      uuid.UUID
	Turns   int
	Model   string
	TraceID string
}

// RunFinishParams ends an execution of a run.
type RunFinishParams struct {
	ID     uuid.UUID
	Epoch  int64  // the execution's fence (Run.LeaseEpoch)
	Status string // succeeded, failed, aborted, interrupted or cancelled
	Output json.RawMessage
	Error  json.RawMessage
}

// RunFinish moves a running run that the execution of lease epoch p.Epoch holds to its final (or
// interrupted) status and releases the lease. A run that was cancelled meanwhile, or whose lease
// was taken over, is ErrRunFinished or ErrLeaseLost and stays as it is.
func (s *Store) RunFinish(ctx context.Context, p RunFinishParams) (*Run, error) {
	finished := p.Status != RunInterrupted
	rows, err := s.db.Query(ctx, `UPDATE runs SET status = $3, output = $4, error = $5,
			finished_at = CASE WHEN $6 THEN now() END, lease_owner = NULL, lease_expires_at = NULL,
			updated_at = now(), version = version + 1
		WHERE id = $1 AND lease_epoch = $2 AND status = 'running'
		RETURNING `+runColumns, p.ID, p.Epoch, p.Status, nullJSON(p.Output), nullJSON(p.Error), finished)
	if err != nil {
		return nil, fmt.Errorf("finish run %s: %w", p.ID, err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Run])
	if err == nil {
		return run, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("finish run %s: %w", p.ID, err)
	}
	cur, err := s.RunGet(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	return cur, finishRefused(cur, p.Epoch)
}

// finishRefused says why an execution's finish was refused: the run was taken over, or it is no
// longer running.
func finishRefused(cur *Run, epoch int64) error {
	if cur.LeaseEpoch != epoch {
		return fmt.Errorf("finish run %s: %w", cur.ID, ErrLeaseLost)
	}
	return fmt.Errorf("finish run %s (%s): %w", cur.ID, cur.Status, ErrRunFinished)
}

// addWait, in an UPDATE of an interrupted run, adds its wait so far (since it stopped to wait) to
// waited_ms; on a run in another state it adds nothing.
const addWait = `waited_ms = waited_ms + CASE WHEN status = 'interrupted'
	THEN greatest((extract(epoch FROM now() - updated_at) * 1000)::bigint, 0) ELSE 0 END`

// RunRequeue marks an interrupted run queued again, for its resume job, and counts the resume.
func (s *Store) RunRequeue(ctx context.Context, id uuid.UUID) error {
	tag, err := s.db.Exec(ctx, `UPDATE runs SET status = 'queued', resumes = resumes + 1, `+addWait+`, updated_at = now(),
		version = version + 1 WHERE id = $1 AND status = 'interrupted'`, id)
	if err != nil {
		return fmt.Errorf("requeue run %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("requeue run %s: %w", id, ErrRunFinished)
	}
	return nil
}

// RunCancel cancels a queued, running or interrupted run. A finished run is ErrRunFinished.
func (s *Store) RunCancel(ctx context.Context, id uuid.UUID) (*Run, error) {
	rows, err := s.db.Query(ctx, `UPDATE runs SET `+addWait+`, status = 'cancelled', finished_at = now(),
			error = '{"status":"CANCELLED","message":"cancelled by request"}', lease_owner = NULL,
			lease_expires_at = NULL, updated_at = now(), version = version + 1
		WHERE id = $1 AND status IN ('queued', 'running', 'interrupted')
		RETURNING `+runColumns, id)
	if err != nil {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Run])
	if err == nil {
		return run, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	cur, err := s.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	return cur, fmt.Errorf("cancel run %s: it is already %s: %w", id, cur.Status, ErrRunFinished)
}

// RunListOrphanedParams bounds the recovery sweep's search.
type RunListOrphanedParams struct {
	// QueuedFor is how long a queued run may have waited since it was last changed before it
	// counts as orphaned when no job of it is waiting: longer than any live worker takes between
	// fetching a run's job and taking its lease.
	QueuedFor time.Duration
	Limit     int
}

// RunListOrphaned returns the runs that no execution holds and no job will pick up: running runs
// whose lease expired (their worker died or froze), and queued runs that waited QueuedFor with no
// job of theirs waiting to be worked (their job was fetched by a worker that died before taking
// the lease, and River does not rescue it). Runs waiting for reviewers are not orphaned.
func (s *Store) RunListOrphaned(ctx context.Context, p RunListOrphanedParams) ([]uuid.UUID, error) {
	rows, err := s.db.Query(ctx, `SELECT id FROM runs r
		WHERE (status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < now())
			OR status = 'queued' AND updated_at < now() - $2::interval
				AND (lease_expires_at IS NULL OR lease_expires_at < now()))
			AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'loupe.run' AND j.args->>'run_id' = r.id::text
				AND j.state IN ('available', 'scheduled', 'retryable', 'pending'))
		ORDER BY updated_at LIMIT $1`, p.Limit, p.QueuedFor)
	if err != nil {
		return nil, fmt.Errorf("list orphaned runs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("list orphaned runs: %w", err)
	}
	return ids, nil
}

// nullJSON stores an empty raw message as SQL NULL, and any other as CleanJSON makes it storable.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return CleanJSON(raw)
}

// RunReleaseLease gives up the lease of the execution fenced by f, so that another execution may
// take the run over at once.
func (s *Store) RunReleaseLease(ctx context.Context, f Fence) error {
	if _, err := s.db.Exec(ctx, `UPDATE runs SET lease_expires_at = now() WHERE id = $1 AND lease_epoch = $2`, f.RunID, f.Epoch); err != nil {
		return fmt.Errorf("release lease of run %s: %w", f.RunID, err)
	}
	return nil
}

// RunReleaseToQueue puts the run that the execution fenced by f holds back in the queue and gives up
// its lease: what executes the run's action cannot be reached for now, and its job is tried
// again later. A run that is no longer running (cancelled meanwhile) is left as it is.
func (s *Store) RunReleaseToQueue(ctx context.Context, f Fence) error {
	if _, err := s.db.Exec(ctx, `UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL,
			updated_at = now(), version = version + 1
		WHERE id = $1 AND lease_epoch = $2 AND status = 'running'`, f.RunID, f.Epoch); err != nil {
		return fmt.Errorf("requeue run %s: %w", f.RunID, err)
	}
	return nil
}

// RunLock locks a run's row until the transaction ends and returns it.
func (s *Store) RunLock(ctx context.Context, id uuid.UUID) (*Run, error) {
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1 FOR UPDATE`, id)
	if err != nil {
		return nil, fmt.Errorf("lock run %s: %w", id, err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Run])
	if err != nil {
		return nil, fmt.Errorf("lock run %s: %w", id, notFound(err))
	}
	return run, nil
}

// RunJobWaiting reports whether a River job for the run is waiting to be worked, so that the
// recovery sweep does not enqueue another.
func (s *Store) RunJobWaiting(ctx context.Context, id uuid.UUID) (bool, error) {
	var waiting bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_job WHERE kind = 'loupe.run'
		AND args->>'run_id' = $1::text AND state IN ('available', 'scheduled', 'retryable', 'pending'))`, id).Scan(&waiting)
	if err != nil {
		return false, fmt.Errorf("look up jobs of run %s: %w", id, err)
	}
	return waiting, nil
}

// RunSetResumeSpan records the span of the turn that interrupted, under which the resume continues
// the run's trace.
func (s *Store) RunSetResumeSpan(ctx context.Context, id uuid.UUID, traceID, spanID string) error {
	if _, err := s.db.Exec(ctx, `UPDATE runs SET resume_span_id = $2, trace_id = coalesce(trace_id, $3) WHERE id = $1`,
		id, spanID, traceID); err != nil {
		return fmt.Errorf("record resume span of run %s: %w", id, err)
	}
	return nil
}

// RunConversation is the conversation a run's traces belong to: a session and, where the program
// names one, a thread of it.
type RunConversation struct {
	Session string
	Thread  string
}

// RunSessions returns the conversation each run's traces belong to (traces.session: Genkit's
// genkit:sessionId, the GenAI conventions' gen_ai.conversation.id; traces.thread: Genkit's
// genkit:threadName), for the runs that have one.
func (s *Store) RunSessions(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID]RunConversation, error) {
	out := map[uuid.UUID]RunConversation{}
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (run_id) run_id, session, coalesce(thread, '') AS thread FROM traces
		WHERE run_id = ANY($1) AND session IS NOT NULL ORDER BY run_id, trace_id`, runIDs)
	if err != nil {
		return nil, fmt.Errorf("sessions of runs: %w", err)
	}
	type row struct {
		RunID   uuid.UUID
		Session string
		Thread  string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, fmt.Errorf("sessions of runs: %w", err)
	}
	for _, r := range got {
		out[r.RunID] = RunConversation{Session: r.Session, Thread: r.Thread}
	}
	return out, nil
}

// qualified prefixes each column of a comma-separated list with table's alias, for a statement
// that joins another relation with columns of the same names.
func qualified(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
