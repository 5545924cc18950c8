package demo

import (
	"context"
	"time"

	"github.com/loupe-dev/loupe"
)

// CountdownInput is the countdown flow's input.
type CountdownInput struct {
	From int `json:"from" jsonschema:"minimum=1,maximum=1000,example=10"`
}

// Tick is one streamed countdown chunk.
type Tick struct {
	N int `json:"n"`
}

func defineCountdown(app *loupe.App) {
	loupe.DefineStreamingFlow(app, "countdown", func(ctx context.Context, in CountdownInput, send func(context.Context, Tick) error) (string, error) {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for n := in.From; n > 0; n-- {
			if err := send(ctx, Tick{N: n}); err != nil {
				return "", err
			}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-t.C:
			}
		}
		return "liftoff", nil
	})
}
