package policy

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"time"
)

// WatchFile calls load with the file's content now and whenever it changes (checked every
// interval; a change counts once two reads agree), until ctx ends. The first load's error is returned, so that a server refuses to start
// on a broken policy; a later broken version is logged and the last good one stays in force.
func WatchFile(ctx context.Context, path string, interval time.Duration, log *slog.Logger, load func(src []byte) error) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := load(src); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		last := src
		var candidate []byte
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now, err := os.ReadFile(path)
			if err != nil {
				log.Warn("read the policy file; the last version read stays in force", "path", path, "err", err)
				continue
			}
			if bytes.Equal(now, last) {
				candidate = nil
				continue
			}
			// A change is loaded once two reads an interval apart agree: an editor's save (or a
			// truncate and write) read halfway is not a policy.
			if candidate == nil || !bytes.Equal(now, candidate) {
				candidate = now
				continue
			}
			last, candidate = now, nil
			if err := load(now); err != nil {
				log.Error("the changed policy file was not loaded; the last good version stays in force", "path", path, "err", err)
				continue
			}
		}
	}()
	return nil
}
