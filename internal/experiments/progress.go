package experiments

import (
	"time"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// Publisher receives an experiment's live progress: the live hub, which sends it to the
// subscribers of experiment:<id> in every process on the database.
type Publisher interface {
	PublishExperiment(id uuid.UUID, p event.Payload)
}

// SetPublisher makes the drivers of this process publish their experiments' progress; call it
// before driving.
func (s *Service) SetPublisher(p Publisher) { s.pub = p }

const (
	// progressEvery spaces an experiment's progress events: a driver scoring hundreds of examples
	// a second sends ten events a second, each with the scores that landed meanwhile.
	progressEvery = 100 * time.Millisecond
	// progressBatch caps the examples' scores in one event, so that it fits a NOTIFY.
	progressBatch = 16
)

// progressPub gathers one driver's progress between events. Its zero Publisher makes it do
// nothing.
type progressPub struct {
	p       Publisher
	id      uuid.UUID
	pending []event.ExperimentExample
	dirty   bool
	last    time.Time
}

func (s *Service) progressPublisher(id uuid.UUID) *progressPub { return &progressPub{p: s.pub, id: id} }

// scored notes an example's scores.
func (q *progressPub) scored(ex *store.Example, runID *uuid.UUID, p *store.ResultScoreParams) {
	if q.p == nil {
		return
	}
	x := event.ExperimentExample{ExampleKey: ex.Key.String(), RunStatus: p.RunStatus, Pass: len(p.Scores) > 0}
	if runID != nil && *runID != uuid.Nil {
		x.RunID = runID.String()
	}
	for _, sc := range p.Scores {
		x.Scores = append(x.Scores, event.ExperimentScore{Evaluator: sc.Evaluator, Score: sc.Score, Pass: sc.Pass})
		x.Pass = x.Pass && sc.Pass
	}
	q.pending = append(q.pending, x)
	q.dirty = true
}

// changed notes that examples were started or scored.
func (q *progressPub) changed() {
	if q.p != nil {
		q.dirty = true
	}
}

// due says that there is progress to publish and the last event is old enough.
func (q *progressPub) due() bool {
	return q.p != nil && q.dirty && time.Since(q.last) >= progressEvery
}

// flush publishes the experiment's counts as read now, with the scores gathered since the last
// event (in several events when they are many).
func (q *progressPub) flush(cur *store.Experiment) {
	if q.p == nil {
		return
	}
	base := event.ExperimentProgressData{ExperimentID: cur.ID.String(), Status: cur.Status, Total: cur.Total,
		Started: cur.Started, Scored: cur.Scored, Passed: cur.Passed, Failed: cur.Scored - cur.Passed}
	for len(q.pending) > progressBatch {
		d := base
		d.Scores = q.pending[:progressBatch]
		q.p.PublishExperiment(q.id, d)
		q.pending = q.pending[progressBatch:]
	}
	base.Scores = q.pending
	q.p.PublishExperiment(q.id, base)
	q.pending, q.dirty, q.last = nil, false, time.Now()
}
