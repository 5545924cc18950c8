package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// Several programs share one database: each one's workers announce the actions they execute in
// the catalogue (store.CatalogueAnnounce) and work their program's own River queue, and a run's
// job goes into the queue of a program that has its action. A run whose action no live program has
// waits in HeldQueue, which nobody works, until a program announcing the action moves it into its
// queue.

// HeldQueue holds the jobs of runs whose action no live program announces.
const HeldQueue = "loupe_held"

// programQueuePrefix starts every program's queue name.
const programQueuePrefix = "program_"

// maxQueueName is River's limit on a queue's name.
const maxQueueName = 64

// ProgramQueue is the River queue of a program's workers: "program_" and the program's name in
// lowercase letters and digits, other characters becoming single underscores, cut with a hash
// to River's 64 characters.
func ProgramQueue(program string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(program) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
			sep = false
			continue
		}
		sep = true
	}
	name := b.String()
	if name == "" {
		name = "unnamed"
	}
	q := programQueuePrefix + name
	if len(q) > maxQueueName {
		h := fnv.New32a()
		_, _ = h.Write([]byte(program))
		suffix := fmt.Sprintf("_%08x", h.Sum32())
		q = strings.TrimRight(q[:maxQueueName-len(suffix)], "_") + suffix
	}
	return q
}

// Program is the name this service announces its actions under.
func (s *Service) Program() string { return s.cfg.Program }

// announce records this process's actions in the catalogue and takes the waiting jobs of them.
func (s *Service) announce(ctx context.Context) error {
	descs := s.registry.List()
	entries := make([]store.CatalogueEntry, 0, len(descs))
	for _, d := range descs {
		raw, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("announce %s: %w", d.Key, err)
		}
		entries = append(entries, store.CatalogueEntry{Key: d.Key, Description: raw})
	}
	moved, err := s.store.CatalogueAnnounce(ctx, store.CatalogueAnnounceParams{
		Instance: s.owner, Program: s.cfg.Program, Queue: s.queue, Actions: entries,
		// Live for three heartbeats: one missed heartbeat does not hold runs back.
		TTL:       3 * s.cfg.AnnounceInterval,
		HeldQueue: HeldQueue, QueuePrefix: programQueuePrefix,
	})
	if errors.Is(err, store.ErrCatalogueBusy) {
		// Another process of this program froze inside its announcement: this one's entry is
		// written, the shared rows are refreshed on a later round.
		s.log.Info("the catalogue's rows of this program are held by another of its processes; announcing them next round", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	if moved > 0 {
		s.log.Info("took runs waiting for this program's actions", "runs", moved, "queue", s.queue)
	}
	return nil
}

// Announce records this process's actions in the catalogue now, rather than at the next
// heartbeat: after a dev server reloaded its prompt files, say. A service without workers
// announces nothing.
func (s *Service) Announce(ctx context.Context) error {
	if s.cfg.Workers == 0 {
		return nil
	}
	if err := s.announce(ctx); err != nil {
		return fmt.Errorf("announce actions: %w", err)
	}
	return nil
}

// announceLoop renews the announcement every AnnounceInterval until the service stops.
func (s *Service) announceLoop() {
	defer s.sweepWG.Done()
	t := time.NewTicker(s.cfg.AnnounceInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopped:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.announce(ctx); err != nil {
			s.log.Warn("announce actions", "err", err)
		}
		cancel()
	}
}

// unannounce removes this process from the catalogue, so that no run is routed to it any more.
func (s *Service) unannounce() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.store.CatalogueRemove(ctx, s.owner); err != nil {
		s.log.Warn("remove from the action catalogue", "err", err)
	}
}

// route is the queue a job of the action goes into: this process's, when it executes the action;
// else a live program's that announces it; else HeldQueue.
func (s *Service) route(ctx context.Context, tx *store.Store, action string) (string, error) {
	if s.cfg.Workers > 0 && s.registry.Lookup(action) != nil {
		return s.queue, nil
	}
	a, err := tx.CatalogueActionGet(ctx, action)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return HeldQueue, nil
	case err != nil:
		return "", err
	case a.Live:
		return a.Queue, nil
	}
	return HeldQueue, nil
}

// descCache holds the catalogue's descriptions decoded, so that each schema compiles once.
type descCache struct {
	mu    sync.Mutex
	descs map[string]*engine.ActionDesc
}

// maxCachedDescs bounds the cache; past it, the cache starts over.
const maxCachedDescs = 1024

func (c *descCache) decode(raw json.RawMessage) (*engine.ActionDesc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.descs[string(raw)]; ok {
		return d, nil
	}
	var d engine.ActionDesc
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("decode catalogue description: %w", err)
	}
	if c.descs == nil || len(c.descs) >= maxCachedDescs {
		c.descs = map[string]*engine.ActionDesc{}
	}
	c.descs[string(raw)] = &d
	return &d, nil
}

// lookupAction finds the first of keys in the local registry, else in the catalogue (live
// programs first, then the one seen last). found is false when no program ever had any of them.
func (s *Service) lookupAction(ctx context.Context, keys ...string) (d *engine.ActionDesc, found bool, err error) {
	for _, k := range keys {
		if a := s.registry.Lookup(k); a != nil {
			return a.Desc(), true, nil
		}
	}
	list, err := s.store.CatalogueActionList(ctx, store.CatalogueActionListParams{Keys: keys})
	if err != nil {
		return nil, false, err
	}
	for _, k := range keys {
		for _, a := range list {
			if a.Key == k {
				if d, err = s.descs.decode(a.Description); err != nil {
					return nil, false, err
				}
				return d, true, nil
			}
		}
	}
	return nil, false, nil
}

// Actions lists the actions runs can be started for: the local registry's and those that live
// programs announce, by key.
func (s *Service) Actions(ctx context.Context) ([]*engine.ActionDesc, error) {
	out := s.registry.List()
	seen := make(map[string]bool, len(out))
	for _, d := range out {
		seen[d.Key] = true
	}
	list, err := s.store.CatalogueActionList(ctx, store.CatalogueActionListParams{LiveOnly: true})
	if err != nil {
		return out, err
	}
	for _, a := range list {
		if seen[a.Key] {
			continue
		}
		d, err := s.descs.decode(a.Description)
		if err != nil {
			s.log.Warn("catalogue", "action", a.Key, "program", a.Program, "err", err)
			continue
		}
		seen[a.Key] = true
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *engine.ActionDesc) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// WaitingReason says why a queued run is not executing when no live worker has its action, and
// is empty otherwise.
func (s *Service) WaitingReason(ctx context.Context, run *store.Run) (string, error) {
	if run.Status != store.RunQueued {
		return "", nil
	}
	if s.cfg.Workers > 0 && s.registry.Lookup(run.Action) != nil {
		return "", nil
	}
	a, err := s.store.CatalogueActionGet(ctx, run.Action)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Sprintf("no worker has announced %s", run.Action), nil
	case err != nil:
		return "", err
	case a.Live:
		return "", nil
	}
	return fmt.Sprintf("no worker for %s has been seen since %s (program %s)", run.Action, sinceText(a.SeenAt), a.Program), nil
}

// sinceText shows a time as the clock when it is today, else with its date.
func sinceText(t time.Time) string {
	t = t.Local()
	if y, m, d := t.Date(); time.Now().Year() == y && time.Now().Month() == m && time.Now().Day() == d {
		return t.Format("15:04")
	}
	return t.Format("2006-01-02 15:04")
}

// toolSchemas are a tool's schemas from the local registry or the catalogue; found is false when
// no program ever announced it.
func (s *Service) toolSchemas(ctx context.Context, name string) (in, out *engine.Schema, found bool, err error) {
	if in, out, err := s.registry.ToolSchemas(name); err == nil {
		return in, out, true, nil
	}
	keys := make([]string, 0, len(toolPrefixes))
	for _, p := range toolPrefixes {
		keys = append(keys, p+name)
	}
	d, found, err := s.lookupAction(ctx, keys...)
	if err != nil || !found {
		return nil, nil, false, err
	}
	return d.InputSchema, d.OutputSchema, true, nil
}

// toolPrefixes is the engine's order for resolving a tool's short name (Registry.LookupTool).
var toolPrefixes = []string{"", "/tool/", "/tool.v2/", "/prompt/", "/dynamic-action-provider/"}
