package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/genkitapp"
)

// startEnv tells a Loupe program that devui start runs it: run without a command, it works as a
// worker (see Run).
const startEnv = "LOUPE_START"

func newStartCommand(cfg *config) *cobra.Command {
	var (
		demo     bool
		eng      engineOptions
		projects []string
	)
	cmd := &cobra.Command{
		Use:   "start [--addr A] [--demo] -- <command> [args...]",
		Short: "Serve the UI on the embedded PostgreSQL and run your program beside it, restarted when it exits",
		Long: `Serve the UI and the APIs in local mode (the embedded PostgreSQL unless DATABASE_URL is set),
then run your program with the database and telemetry settings it needs, show its output, and run it
again when it exits (or when devui start gets SIGHUP), as genkit start does:

  devui start -- go run .

Your program gets DATABASE_URL (the same database), LOUPE_START=1, GENKIT_ENV=dev and
GENKIT_TELEMETRY_SERVER (this server, for a Genkit app's traces). A Loupe program (devui.Main) run
without a command then works as a worker: it executes the runs of its actions, and a restart takes
over their checkpoints, so edit, save and restart keep every durable run. The code of a flow between
its generate calls must be deterministic for that (see the README's "Durability").`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				return errors.New("start runs the command after -- (as in: devui start -- go run .)")
			}
			addr, _ := cmd.Flags().GetString("addr")
			eng.noDemo = !demo
			if !demo {
				eng.workers = 0 // your program is the worker
			}
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			// The command's own project: where a Genkit app started here writes its runtime
			// files (the nearest package.json or go.mod up from the working directory).
			projects = absPaths(append(genkitapp.ProjectRoots(wd), projects...))
			return start(cmd.Context(), cfg, addr, eng, projects, args, cmd.ErrOrStderr())
		},
	}
	bindGenkitProjects(cmd, &projects)
	cmd.Flags().String("addr", envOr("LOUPE_ADDR", "127.0.0.1:4000"), "listen address, loopback (env LOUPE_ADDR)")
	cmd.Flags().BoolVar(&demo, "demo", false, "also register and execute the demo agents")
	eng.bind(cmd.Flags(), 8)
	return cmd
}

// start serves in local mode and supervises the user's command until ctx ends. It stops them in
// the order they depend on each other: the command first, while the server and the database are
// still up for it to finish with (a Loupe worker leaves the action catalogue and keeps its runs'
// checkpoints), then the server, then the database.
func start(ctx context.Context, cfg *config, addr string, eng engineOptions, projects []string, argv []string, out io.Writer) error {
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	type ready struct{ addr, url string }
	readyCh := make(chan ready, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve(serveCtx, cfg, serveOptions{addr: addr, dev: true, migrate: true, bodyLimit: 16 << 20, engine: eng,
			genkitProjects: projects, ready: func(addr, url string) { readyCh <- ready{addr, url} }})
	}()
	var r ready
	select {
	case r = <-readyCh:
	case err := <-served:
		return err
	case <-ctx.Done():
		stopServe()
		return <-served
	}
	log, err := cfg.logger()
	if err != nil {
		stopServe()
		return errors.Join(err, <-served)
	}
	fmt.Fprintf(out, "Loupe is at http://%s; running %s (SIGHUP restarts it)\n", r.addr, strings.Join(argv, " "))
	sup := &supervisor{argv: argv, out: out, log: log, env: append(os.Environ(),
		"DATABASE_URL="+r.url, startEnv+"=1", "GENKIT_ENV=dev", "GENKIT_TELEMETRY_SERVER=http://"+r.addr)}
	supCtx, stopCommand := context.WithCancel(ctx)
	defer stopCommand()
	supervised := make(chan struct{})
	go func() { defer close(supervised); sup.run(supCtx) }()
	serving := true
	select {
	case <-ctx.Done(): // Ctrl-C
	case err = <-served: // the database was lost for good
		serving = false
	}
	stopCommand()
	<-supervised
	if serving {
		stopServe()
		err = <-served
	}
	return err
}

// supervisor runs a command, and runs it again after it exits or when asked (SIGHUP), with a
// growing pause while it keeps exiting at once.
type supervisor struct {
	argv []string
	env  []string
	out  io.Writer
	log  *slog.Logger
	// stopWithin is how long the command has to exit on SIGTERM before its group is killed:
	// devui start stops the server and the database only after that, so it bounds how long a
	// program that ignores the signal holds Ctrl-C up. Zero is stopWithinDefault.
	stopWithin time.Duration
}

// stopWithinDefault is the command's time to stop when supervisor.stopWithin is not set: a Loupe
// worker's in-flight runs checkpoint and leave the catalogue well within it.
const stopWithinDefault = 10 * time.Second

func (s *supervisor) run(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	pause := time.Second
	for ctx.Err() == nil {
		began := time.Now()
		cmd := exec.Command(s.argv[0], s.argv[1:]...)
		cmd.Env = s.env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop `go run`'s child too
		stdout, stderr := prefixed(s.out, "app | "), prefixed(s.out, "app | ")
		cmd.Stdout, cmd.Stderr = stdout, stderr
		exitedZero := false
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(s.out, "devui start: cannot run %s: %v\n", s.argv[0], err)
		} else {
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				stdout.Flush()
				stderr.Flush()
				exitedZero = err == nil
				if !exitedZero || time.Since(began) > quickExit {
					fmt.Fprintf(s.out, "devui start: %s exited (%v); running it again\n", s.argv[0], exitText(err))
				}
			case <-hup:
				fmt.Fprintf(s.out, "devui start: restarting %s\n", s.argv[0])
				s.stopGroup(cmd, exited)
				pause = 0
			case <-ctx.Done():
				s.stopGroup(cmd, exited)
				return
			}
		}
		ran := time.Since(began)
		if ran > quickExit {
			pause = time.Second
		}
		maxPause := 10 * time.Second
		if exitedZero && ran <= quickExit {
			// A program that ends by itself at once is no Dev UI target (a script, a CLI that
			// printed its help): running it again every second helps nobody.
			pause, maxPause = max(pause, 5*time.Second), time.Minute
			fmt.Fprintf(s.out, "devui start: %s exited on its own (status 0) after %s; a program under devui start must keep running "+
				"(a Genkit app's reflection server, or a Loupe worker, runs only while its process does). Running it again in %s; SIGHUP runs it now\n",
				s.argv[0], ran.Round(time.Millisecond), pause)
		}
		select {
		case <-ctx.Done():
			return
		case <-hup:
			fmt.Fprintf(s.out, "devui start: restarting %s\n", s.argv[0])
		case <-time.After(pause):
		}
		pause = min(max(pause*2, time.Second), maxPause)
	}
}

// quickExit is how soon a program that exits counts as exiting at once: a program that ran longer
// is started again after a second.
const quickExit = 10 * time.Second

// stopGroup asks the command's process group to stop (SIGTERM: a Loupe worker keeps its runs'
// checkpoints), and kills the group once stopWithin has passed. The exit status of a command it
// stopped is the signal's, so it is only logged at debug level.
func (s *supervisor) stopGroup(cmd *exec.Cmd, exited <-chan error) {
	within := s.stopWithin
	if within <= 0 {
		within = stopWithinDefault
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	var err error
	select {
	case err = <-exited:
	case <-time.After(within):
		s.log.Warn("the command did not stop on SIGTERM; killing it", "command", s.argv[0], "after", within)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-exited
	}
	s.log.Debug("stopped the command", "command", s.argv[0], "status", exitText(err))
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// lineWriter writes each whole line it is given to out with a prefix.
type lineWriter struct {
	mu     sync.Mutex
	out    io.Writer
	prefix string
	buf    []byte
}

func prefixed(out io.Writer, prefix string) *lineWriter { return &lineWriter{out: out, prefix: prefix} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Flush writes a last line that had no newline.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, w.buf)
		w.buf = w.buf[:0]
	}
}
