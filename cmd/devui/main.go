// Command devui is Loupe: a dev UI and a durable agent engine for Go, in one binary.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devui:", err)
		os.Exit(exitCode(err))
	}
}

// run builds the command tree and executes it with args.
func run(ctx context.Context, args []string) error {
	cmd := newRootCommand()
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}
