package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// A flow run through the reflection API (the genkit CLI's flow:run and flow:batchRun, the Dev UI
// server's runAction) is a durable run, as every run started from Loupe is: it is executed by
// whichever program announces the flow (devui start's own program among them), recorded, shown
// on its run page, and a flow that stops at an interrupt waits in the inbox, where a reviewer's
// decision resumes it. The call answers in Genkit's shapes as the run goes: the trace id at once
// (a run's trace id is known when it is created), the flow's own chunks as they are stored, and
// at the end its result, its error, or, for an interrupted run, FAILED_PRECONDITION naming the
// question and where it waits. A caller that goes away leaves the run going; cancelAction cancels
// it.

// genkitDurablePoll is how often a reflection call looks at its run's chunks and status.
const genkitDurablePoll = 40 * time.Millisecond

// genkitRunDurably answers /api/runAction for a flow by running it as a durable run.
func (s *Server) genkitRunDurably(c echo.Context, req genkitRunRequest, stream bool) error {
	ctx := c.Request().Context()
	run, err := s.deps.Runs.StartRun(ctx, runs.StartParams{Action: req.Key, Input: req.Input,
		Context: req.Context, CreatedBy: principal(c).Username, Labels: req.TelemetryLabels})
	var v *runs.ValidationError
	switch {
	case errors.As(err, &v):
		s.genkitHeaders(c, stream)
		return genkitFinal(c, map[string]any{"error": genkitStatusBody(engine.StatusInvalidArgument, v.Error(), map[string]any{"field": v.Field})})
	case errors.Is(err, runs.ErrInvalid):
		return c.JSON(http.StatusNotFound, genkitStatusBody(engine.StatusNotFound, fmt.Sprintf("action %q not found", req.Key), nil))
	case err != nil:
		return err
	}
	tid, sid := runs.RootSpanIDs(run)
	traceID := tid.String()
	w := c.Response()
	w.Header().Set("X-Genkit-Trace-Id", traceID)
	w.Header().Set("X-Genkit-Span-Id", sid.String())
	w.Header().Set("X-Loupe-Run-Id", run.ID.String())
	s.active.add(traceID, func(error) {
		if _, err := s.deps.Runs.Cancel(context.WithoutCancel(ctx), run.ID, principal(c).Username); err != nil && !errors.Is(err, runs.ErrConflict) {
			s.log.Warn("genkit cancelAction: cancel run", "run", run.ID, "err", err)
		}
	})
	defer s.active.remove(traceID)
	s.genkitHeaders(c, stream)

	var last int64
	var line bytes.Buffer
	tick := time.NewTicker(genkitDurablePoll)
	defer tick.Stop()
	for {
		if stream {
			chunks, err := s.store.ChunkList(ctx, run.ID, last, 500)
			if err != nil {
				return err
			}
			for _, ch := range chunks {
				last = ch.Seq
				if ch.Role != "flow" {
					continue // the model's chunks are the flow's business; a flow streams its own
				}
				line.Reset()
				if err := json.Compact(&line, ch.Content); err != nil {
					return err
				}
				line.WriteByte('\n')
				if _, err := w.Write(line.Bytes()); err != nil {
					return err
				}
				w.Flush()
			}
			if len(chunks) == 500 {
				continue
			}
		}
		cur, err := s.store.RunGet(ctx, run.ID)
		if err != nil {
			return err
		}
		if final := s.genkitRunOutcome(c, cur, traceID); final != nil {
			if stream {
				if rest, err := s.store.ChunkList(ctx, run.ID, last, 500); err == nil && len(rest) > 0 {
					continue // chunks stored before the outcome go out first
				}
			}
			return genkitFinal(c, final)
		}
		select {
		case <-ctx.Done():
			return nil // the caller went away; the run goes on
		case <-tick.C:
		}
	}
}

// genkitRunOutcome is the last line of a reflection call for a run that has settled, nil while
// it runs.
func (s *Server) genkitRunOutcome(c echo.Context, run *store.Run, traceID string) map[string]any {
	details := map[string]any{"traceId": traceID, "runId": run.ID.String()}
	switch run.Status {
	case store.RunSucceeded:
		out := run.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		return map[string]any{"result": out, "telemetry": map[string]any{"traceId": traceID}}
	case store.RunFailed, store.RunAborted:
		var e struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(run.Error, &e)
		st := engine.Status(e.Status)
		if _, ok := genkitCodes[st]; !ok {
			st = engine.StatusUnknown
		}
		return map[string]any{"error": genkitStatus(st, e.Message, details)}
	case store.RunCancelled:
		return map[string]any{"error": genkitStatus(engine.StatusCancelled, "Action was cancelled", details)}
	case store.RunInterrupted:
		return map[string]any{"error": s.genkitInterrupted(c, run, details)}
	}
	return nil
}

// genkitInterrupted is the Status of a durable run that waits for a reviewer: what it asks, and
// where it waits.
func (s *Server) genkitInterrupted(c echo.Context, run *store.Run, details map[string]any) map[string]any {
	ctx := c.Request().Context()
	list, err := s.store.InterruptListByRun(ctx, run.ID)
	if err != nil {
		s.log.Warn("genkit runAction: list interrupts", "run", run.ID, "err", err)
	}
	inbox := "http://" + c.Request().Host + "/inbox"
	var questions []string
	interrupts := []map[string]any{}
	var first uuid.UUID
	for _, it := range list {
		if it.Status != store.InterruptPending {
			continue
		}
		if first == uuid.Nil {
			first = it.ID
		}
		var md any
		_ = json.Unmarshal(it.Metadata, &md)
		interrupts = append(interrupts, map[string]any{"id": it.ID.String(), "name": it.Tool, "ref": it.Ref, "input": json.RawMessage(it.Input), "interrupt": md})
		q := it.Tool
		if m := interruptMessage(it.Metadata); m != "" && m != "(no message)" {
			q += ": " + m
		}
		questions = append(questions, q)
	}
	if first != uuid.Nil {
		inbox += "?sel=" + first.String()
	}
	details["interrupts"] = interrupts
	details["inbox"] = inbox
	details["run"] = "http://" + c.Request().Host + "/runs/" + run.ID.String()
	msg := fmt.Sprintf("%s stopped to ask a person (%s); it waits in Loupe's inbox at %s and goes on when a reviewer answers",
		run.Action, strings.Join(questions, "; "), inbox)
	return genkitStatusBody(engine.StatusFailedPrecondition, msg, details)
}

// genkitHeaders sends the status line and the content type of a reflection call's answer: NDJSON
// framing (as text/plain, as Genkit's) when it streams, JSON when it does not.
func (s *Server) genkitHeaders(c echo.Context, stream bool) {
	w := c.Response()
	w.Header().Set("X-Genkit-Version", "loupe/"+s.cfg.Version)
	if stream {
		w.Header().Set(echo.HeaderContentType, "text/plain")
	} else {
		w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	w.WriteHeader(http.StatusOK)
	w.Flush()
}

// genkitFinal writes a reflection call's last line, with no newline after it (see the top of
// genkit_reflection.go).
func genkitFinal(c echo.Context, final map[string]any) error {
	b, err := json.Marshal(final)
	if err != nil {
		return err
	}
	_, err = c.Response().Write(b)
	return err
}
