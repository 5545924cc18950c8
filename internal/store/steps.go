package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Op kinds of a durable flow's journal.
const (
	StepKindStep     = "step"
	StepKindGenerate = "generate"
)

// RunStep is one op of a durable flow's journal: a step with its result or error, or a generate
// call with its final response.
type RunStep struct {
	RunID uuid.UUID `db:"run_id" json:"-"`
	Seq   int       `db:"seq" json:"seq"`
	Kind  string    `db:"kind" json:"kind"`
	Name  string    `db:"name" json:"name,omitempty"`
	// Generation is a generate op's call number among the flow's generate calls.
	Generation *int            `db:"generation" json:"generation,omitempty"`
	Output     json.RawMessage `db:"output" json:"output,omitempty"`
	Error      json.RawMessage `db:"error" json:"error,omitempty"`
	CreatedAt  time.Time       `db:"created_at" json:"created_at"`
}

const stepColumns = `run_id, seq, kind, name, generation, output, error, created_at`

// queueSteps adds the insert of journal rows to b. A row already at a seq is kept: an op is
// journaled once.
func queueSteps(b *pgx.Batch, runID uuid.UUID, steps []RunStep) {
	n := len(steps)
	seqs, kinds, names, gens, outputs, errs := make([]int, n), make([]string, n), make([]string, n), make([]*int, n),
		make([]*string, n), make([]*string, n)
	for i, st := range steps {
		seqs[i], kinds[i], names[i], gens[i] = st.Seq, st.Kind, CleanText(st.Name), st.Generation
		outputs[i], errs[i] = jsonText(st.Output), jsonText(st.Error)
	}
	b.Queue(`INSERT INTO run_steps (run_id, seq, kind, name, generation, output, error)
		SELECT $1, * FROM unnest($2::int[], $3::text[], $4::text[], $5::int[], $6::jsonb[], $7::jsonb[])
		ON CONFLICT (run_id, seq) DO NOTHING`, runID, seqs, kinds, names, gens, outputs, errs)
}

// StepList returns a run's journal, in op order.
func (s *Store) StepList(ctx context.Context, runID uuid.UUID) ([]*RunStep, error) {
	rows, err := s.db.Query(ctx, `SELECT `+stepColumns+` FROM run_steps WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, err)
	}
	steps, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[RunStep])
	if err != nil {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, err)
	}
	return steps, nil
}

// jsonText is a JSON document for a jsonb array element: nil (NULL) when empty.
func jsonText(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	t := string(CleanJSON(raw))
	return &t
}
