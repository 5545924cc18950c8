package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// forkPlan is what a fork copies and changes, worked out before its transaction.
type forkPlan struct {
	turn      int
	beforeSeq int
	// beforeStep bounds the copied journal: the ops before the generate call the fork cuts.
	beforeStep int
	messages   map[int]json.RawMessage // seq -> replacement content
	roles      map[int]string
	turns      map[int]int
	outputs    []toolOutputEdit
}

type toolOutputEdit struct {
	turn   int
	ref    string
	output json.RawMessage // engine.ToolOutput JSON, for the ledger
}

// planFork checks the fork turn and the edits against the original's history.
func (s *Service) planFork(ctx context.Context, orig *store.Run, turn int, edits []Edit) (*forkPlan, error) {
	msgs, err := s.store.MessageList(ctx, orig.ID)
	if err != nil {
		return nil, err
	}
	// Turn N starts at the N-th model message (0-based): everything before it is copied. A turn
	// whose model call failed or was cut short recorded no model message and cannot be forked
	// from. The run page offers the same turns (forkTurns in web/templates/run.templ).
	var modelSeqs []int
	for _, m := range msgs {
		if m.Role == string(engine.RoleModel) {
			modelSeqs = append(modelSeqs, m.Seq)
		}
	}
	if n := len(modelSeqs); turn < 0 || turn >= n {
		msg := fmt.Sprintf("run %s has turns 0 to %d to fork from; %d is not one of them", orig.ID, n-1, turn)
		if n == 0 {
			msg = fmt.Sprintf("run %s recorded no model response, so it has no turn to fork from", orig.ID)
		}
		return nil, &ValidationError{Field: "turn", Message: msg}
	}
	plan := &forkPlan{turn: turn, beforeSeq: modelSeqs[turn], messages: map[int]json.RawMessage{}, roles: map[int]string{}, turns: map[int]int{}}
	bySeq := map[int]*store.RunMessage{}
	for _, m := range msgs {
		bySeq[m.Seq] = m
	}
	if plan.beforeStep, err = s.stepCut(ctx, orig.ID, bySeq[plan.beforeSeq].Generation); err != nil {
		return nil, err
	}
	for i, e := range edits {
		field := fmt.Sprintf("edits/%d", i)
		switch {
		case e.Seq != nil && len(e.Message) > 0 && e.Turn == nil && e.Ref == "" && len(e.Output) == 0:
			m, ok := bySeq[*e.Seq]
			if !ok || *e.Seq >= plan.beforeSeq {
				return nil, &ValidationError{Field: field + "/seq", Message: fmt.Sprintf("the fork copies messages 0 to %d; %d is not one of them", plan.beforeSeq-1, *e.Seq)}
			}
			var msg engine.Message
			if err := json.Unmarshal(e.Message, &msg); err != nil {
				return nil, &ValidationError{Field: field + "/message", Message: "not a message: " + err.Error(), Cause: err}
			}
			switch msg.Role {
			case engine.RoleSystem, engine.RoleUser, engine.RoleModel, engine.RoleTool:
			default:
				return nil, &ValidationError{Field: field + "/message/role", Message: fmt.Sprintf("%q is not one of system, user, model, tool", msg.Role)}
			}
			raw, err := json.Marshal(&msg)
			if err != nil {
				return nil, fmt.Errorf("encode edited message: %w", err)
			}
			plan.messages[m.Seq], plan.roles[m.Seq], plan.turns[m.Seq] = raw, string(msg.Role), m.Turn
		case e.Turn != nil && e.Ref != "" && len(e.Output) > 0 && e.Seq == nil && len(e.Message) == 0:
			if err := plan.editToolOutput(msgs, e, field); err != nil {
				return nil, err
			}
		default:
			return nil, &ValidationError{Field: field, Message: "an edit is either {seq, message} or {turn, ref, output}"}
		}
	}
	return plan, nil
}

// planCopy plans copying a run's own history before turn, unedited: what an exact replay or a
// re-run of a fork (or of a replay of one) starts from. The history is cut where the run's turn
// starts (its turn-th model message), or kept whole when it has no such message.
func (s *Service) planCopy(ctx context.Context, run *store.Run, turn int) (*forkPlan, error) {
	msgs, err := s.store.MessageList(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	plan := &forkPlan{turn: turn, messages: map[int]json.RawMessage{}, roles: map[int]string{}, turns: map[int]int{}}
	models, gen := 0, 0
	for _, m := range msgs {
		plan.beforeSeq, gen = m.Seq+1, m.Generation
		if m.Role == string(engine.RoleModel) {
			if models == turn {
				plan.beforeSeq = m.Seq
				break
			}
			models++
		}
	}
	if plan.beforeStep, err = s.stepCut(ctx, run.ID, gen); err != nil {
		return nil, err
	}
	return plan, nil
}

// stepCut is where a copy of a run's journal ends when the copy cuts its generate call number
// gen: at that call's op, which the copy runs again; the whole journal when the call never
// finished (every op of the journal came before it).
func (s *Service) stepCut(ctx context.Context, runID uuid.UUID, gen int) (int, error) {
	steps, err := s.store.StepList(ctx, runID)
	if err != nil {
		return 0, err
	}
	cut := 0
	for _, st := range steps {
		if st.Kind == store.StepKindGenerate && st.Generation != nil && *st.Generation >= gen {
			return st.Seq, nil
		}
		cut = st.Seq + 1
	}
	return cut, nil
}

// editToolOutput replaces the output of the tool response with the edit's ref in the tool message
// of the edit's turn (applying on top of an earlier edit of the same message).
func (p *forkPlan) editToolOutput(msgs []*store.RunMessage, e Edit, field string) error {
	if *e.Turn >= p.turn || *e.Turn < 0 {
		return &ValidationError{Field: field + "/turn", Message: fmt.Sprintf("the fork copies turns 0 to %d; %d is not one of them", p.turn-1, *e.Turn)}
	}
	var output any
	if err := json.Unmarshal(e.Output, &output); err != nil {
		return &ValidationError{Field: field + "/output", Message: "not valid JSON", Cause: err}
	}
	for _, m := range msgs {
		if m.Seq >= p.beforeSeq || m.Turn != *e.Turn || m.Role != string(engine.RoleTool) {
			continue
		}
		content := m.Content
		if edited, ok := p.messages[m.Seq]; ok {
			content = edited
		}
		var msg engine.Message
		if err := json.Unmarshal(content, &msg); err != nil {
			return fmt.Errorf("decode message %d: %w", m.Seq, err)
		}
		for _, part := range msg.Content {
			tr := part.ToolResponse
			if tr == nil || tr.Ref != e.Ref {
				continue
			}
			tr.Output = output
			raw, err := json.Marshal(&msg)
			if err != nil {
				return fmt.Errorf("encode edited message: %w", err)
			}
			ledger, err := json.Marshal(engine.ToolOutput{Output: output, Content: tr.Content})
			if err != nil {
				return fmt.Errorf("encode edited output: %w", err)
			}
			p.messages[m.Seq], p.roles[m.Seq], p.turns[m.Seq] = raw, m.Role, m.Turn
			p.outputs = append(p.outputs, toolOutputEdit{turn: *e.Turn, ref: e.Ref, output: ledger})
			return nil
		}
	}
	return &ValidationError{Field: field + "/ref", Message: fmt.Sprintf("turn %d has no tool response with ref %q", *e.Turn, e.Ref)}
}

// apply copies the history and applies the edits, in the fork's transaction.
func (p *forkPlan) apply(ctx context.Context, tx *store.Store, from, to uuid.UUID) error {
	if err := tx.RunCopyHistory(ctx, store.RunCopyHistoryParams{From: from, To: to, BeforeSeq: p.beforeSeq, BeforeTurn: p.turn,
		BeforeStep: p.beforeStep}); err != nil {
		return err
	}
	for seq, content := range p.messages {
		if err := tx.MessagePut(ctx, to, seq, p.turns[seq], p.roles[seq], content); err != nil {
			return err
		}
		var msg struct {
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(content, &msg); err != nil {
			return fmt.Errorf("fork: decode edited message %d: %w", seq, err)
		}
		if p.roles[seq] != string(engine.RoleModel) && p.roles[seq] != string(engine.RoleTool) {
			continue // input messages stream no chunks
		}
		if err := tx.ChunkReplaceMessage(ctx, to, p.turns[seq], p.roles[seq], msg.Content); err != nil {
			return err
		}
	}
	for _, o := range p.outputs {
		if err := tx.ToolCallSetOutput(ctx, to, o.turn, o.ref, o.output); err != nil {
			return err
		}
	}
	return nil
}
