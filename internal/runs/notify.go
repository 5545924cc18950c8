package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/loupe-dev/loupe/internal/notify"
	"github.com/loupe-dev/loupe/internal/store"
)

// WebhookQueue is the River queue of webhook deliveries, worked by every process with workers and
// webhooks configured.
const WebhookQueue = "loupe_webhooks"

// WebhookArgs is the River job that posts one notification to one receiver. The body is built
// when the event happens and stored with the job, so that every attempt posts the same bytes; the
// receiver is named by its id, never its URL (which may hold a token): the process that works
// the job finds the URL in its own configuration.
type WebhookArgs struct {
	InterruptID uuid.UUID       `json:"interrupt_id"`
	Event       string          `json:"event"`
	Target      string          `json:"target"`
	Key         string          `json:"key"`
	Body        json.RawMessage `json:"body"`
}

// Kind names the job kind in River's tables.
func (WebhookArgs) Kind() string { return "loupe.webhook" }

// webhookWorker is River's worker for WebhookArgs: one attempt per job attempt, logged in
// webhook_deliveries; an error makes River try again after notify.Config.NextRetry.
type webhookWorker struct {
	river.WorkerDefaults[WebhookArgs]
	svc *Service
}

// Timeout leaves the attempt's own timeout room to answer first.
func (w *webhookWorker) Timeout(*river.Job[WebhookArgs]) time.Duration {
	return w.svc.hooks.Timeout + 5*time.Second
}

// NextRetry backs off exponentially from the failed attempt, as the delivery log says.
func (w *webhookWorker) NextRetry(job *river.Job[WebhookArgs]) time.Time {
	return w.svc.hooks.NextRetry(attemptedAt(job), job.Attempt, job.ID)
}

func attemptedAt(job *river.Job[WebhookArgs]) time.Time {
	if job.AttemptedAt != nil {
		return *job.AttemptedAt
	}
	return time.Now()
}

func (w *webhookWorker) Work(ctx context.Context, job *river.Job[WebhookArgs]) error {
	s := w.svc
	a := job.Args
	rawURL, ok := s.hooks.Targets()[a.Target]
	// The attempt's time is River's (when it took the job), the time its retry is counted from:
	// on a loaded machine the job may wait a while between being taken and this call, and a log
	// whose next retry came before its attempt would read as nonsense.
	d := &store.WebhookDelivery{InterruptID: a.InterruptID, Event: a.Event, Target: a.Target, DeliveryKey: a.Key,
		JobID: &job.ID, Attempt: job.Attempt, AttemptedAt: attemptedAt(job)}
	started := time.Now()
	var status int
	var err error
	if !ok {
		// Every process with workers needs the same --webhook list; this one lacks the receiver.
		err = fmt.Errorf("webhook %s is not configured in this process (%s); configure the same webhooks in every process with workers", a.Target, s.owner)
	} else {
		d.Target = a.Target + " " + notify.Redact(rawURL)
		status, err = s.sender.Post(ctx, rawURL, a.Event, a.Key, a.Body)
	}
	d.DurationMS = int(time.Since(started).Milliseconds())
	if status != 0 {
		d.StatusCode = &status
	}
	if err != nil {
		msg := err.Error()
		d.Error = &msg
		if job.Attempt < job.MaxAttempts {
			next := s.hooks.NextRetry(attemptedAt(job), job.Attempt, job.ID)
			d.NextRetryAt = &next
		}
	}
	logCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if lerr := s.store.WebhookDeliveryInsert(logCtx, d); lerr != nil && !errors.Is(lerr, store.ErrNotFound) {
		s.log.Warn("webhook: log the delivery attempt", "interrupt", a.InterruptID, "err", lerr)
	}
	if err != nil {
		s.log.Warn("webhook delivery failed", "interrupt", a.InterruptID, "event", a.Event, "target", d.Target,
			"attempt", job.Attempt, "of", job.MaxAttempts, "status", status, "err", err)
		return err
	}
	s.log.Info("webhook delivered", "interrupt", a.InterruptID, "event", a.Event, "target", d.Target, "attempt", job.Attempt, "status", status)
	return nil
}

// NotifyEvent is what happened to an interrupt, for Notify.
type NotifyEvent struct {
	// Event is one of notify.EventPending, notify.EventEscalated, notify.EventExpired.
	Event string
	// EscalatedTo names whom an escalation hands the interrupt to (a role, a group, people).
	EscalatedTo string
}

// Notify enqueues the webhooks of an event on it, one job per receiver, in tx: the transaction
// that makes the event happen (stores the interrupt, escalates it, expires it), so that the
// notification is enqueued exactly when the event commits. It does nothing without webhooks.
// Escalation calls it with notify.EventEscalated in the transaction that records the escalation.
func (s *Service) Notify(ctx context.Context, tx *store.Store, run *store.Run, it *store.Interrupt, ev NotifyEvent) error {
	if !s.hooks.Enabled() {
		return nil
	}
	if tx.Tx() == nil {
		return fmt.Errorf("notify %s of interrupt %s: not in a transaction", ev.Event, it.ID)
	}
	p := notify.Payload{Event: ev.Event, OccurredAt: time.Now().UTC(), Interrupt: notify.Interrupt{
		ID: it.ID.String(), RunID: it.RunID.String(), Action: run.Action, Tool: it.Tool, Ref: it.Ref, Status: it.Status,
		Input: it.Input, URL: notify.ItemURL(s.hooks.BaseURL, it.ID.String()), ExpiresAt: it.ExpiresAt,
		ResolvedBy: deref(it.ResolvedBy), Comment: deref(it.Comment), EscalatedTo: ev.EscalatedTo,
	}}
	var md struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(it.Metadata, &md)
	p.Interrupt.Message = md.Message
	var pol struct {
		Rule string `json:"rule"`
	}
	_ = json.Unmarshal(it.Policy, &pol)
	p.Interrupt.Rule = pol.Rule
	var params []river.InsertManyParams
	for target := range s.hooks.Targets() {
		p.ID = uuid.NewString()
		body, err := p.Body()
		if err != nil {
			return err
		}
		params = append(params, river.InsertManyParams{
			Args:       WebhookArgs{InterruptID: it.ID, Event: ev.Event, Target: target, Key: p.ID, Body: body},
			InsertOpts: &river.InsertOpts{Queue: WebhookQueue, MaxAttempts: s.hooks.MaxAttempts},
		})
	}
	if _, err := s.river.InsertManyTx(ctx, tx.Tx(), params); err != nil {
		return fmt.Errorf("notify %s of interrupt %s: %w", ev.Event, it.ID, err)
	}
	return nil
}

// notifyPending enqueues the pending notifications of the interrupts among created that no
// policy decided, in the transaction that stored them.
func (s *Service) notifyPending(ctx context.Context, tx *store.Store, run *store.Run, created []*store.Interrupt) error {
	if !s.hooks.Enabled() || len(created) == 0 {
		return nil
	}
	current, err := tx.InterruptListByRun(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, it := range sameInterrupts(created, current) {
		if it.Status != store.InterruptPending {
			continue
		}
		if err := s.Notify(ctx, tx, run, it, NotifyEvent{Event: notify.EventPending}); err != nil {
			return err
		}
	}
	return nil
}
