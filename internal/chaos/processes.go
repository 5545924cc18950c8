package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// buildDevui compiles cmd/devui into dir. The harness runs from the repository's root, as
// `go run ./internal/chaos` does.
func buildDevui(ctx context.Context, dir string) (string, error) {
	if _, err := os.Stat("cmd/devui"); err != nil {
		return "", errors.New("run the harness from the repository's root (go run ./internal/chaos)")
	}
	bin := filepath.Join(dir, "devui")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/devui")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build devui: %w\n%s", err, out)
	}
	return bin, nil
}

// cluster is the PostgreSQL cluster every process shares, started with `devui db start`. The
// processes reach it through proxy, a loopback port that stays the same when the postmaster is
// killed and started again on another port (devui db start picks a free port each time).
type cluster struct {
	devui, dataDir string
	proxy          *proxy
	url            string // through the proxy

	mu      sync.Mutex
	outages []outage
}

// outage is a time the postmaster was down; takeover samples that overlap one are left out.
type outage struct{ from, to time.Time }

func newCluster(devui, dataDir string) (*cluster, error) {
	p, err := newProxy()
	if err != nil {
		return nil, err
	}
	return &cluster{devui: devui, dataDir: dataDir, proxy: p}, nil
}

// start runs `devui db start` until it succeeds or a minute passes: right after a postmaster was
// killed, its orphaned backends may still hold the shared memory, and postgres refuses to start
// until they have exited.
func (c *cluster) start(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := exec.CommandContext(ctx, c.devui, "db", "start", "--data-dir", c.dataDir).Output()
		if err == nil {
			return c.attach(strings.TrimSpace(lastLine(out)))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
			}
			return fmt.Errorf("devui db start: %w", err)
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// attach points the proxy at the cluster's URL and keeps that URL with the proxy's address.
func (c *cluster) attach(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("devui db start printed %q, not a URL", raw)
	}
	c.proxy.setBackend(u.Host)
	u.Host = c.proxy.addr()
	c.url = u.String()
	return nil
}

// killPostmaster SIGKILLs the postmaster (the first line of postmaster.pid), drops every proxied
// connection as a crashed database host would, and starts the cluster again.
func (c *cluster) killPostmaster(ctx context.Context, log *slog.Logger) error {
	raw, err := os.ReadFile(filepath.Join(c.dataDir, "postgres", "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("read postmaster.pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %w", err)
	}
	down := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill postmaster %d: %w", pid, err)
	}
	c.proxy.setBackend("")
	c.proxy.dropAll()
	log.Info("killed the postmaster", "pid", pid)
	err = c.start(ctx)
	c.mu.Lock()
	c.outages = append(c.outages, outage{from: down, to: time.Now()})
	c.mu.Unlock()
	if err == nil {
		log.Info("postmaster started again", "down", time.Since(down).Round(time.Millisecond))
	}
	return err
}

// downDuring reports whether the postmaster was down at some moment between from and to.
func (c *cluster) downDuring(from, to time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.outages {
		if o.from.Before(to) && o.to.After(from) {
			return true
		}
	}
	return false
}

// lastOutageEnd is when the latest outage that ended after from ended, and whether there was one.
func (c *cluster) lastOutageEnd(from time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var end time.Time
	for _, o := range c.outages {
		if o.to.After(from) && o.to.After(end) {
			end = o.to
		}
	}
	return end, !end.IsZero()
}

func (c *cluster) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = exec.CommandContext(ctx, c.devui, "db", "stop", "--data-dir", c.dataDir).Run()
	c.proxy.close()
}

// proxy forwards loopback TCP connections to the current postmaster.
type proxy struct {
	ln net.Listener

	mu      sync.Mutex
	backend string
	conns   map[net.Conn]struct{}
}

func newProxy() (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &proxy{ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) setBackend(addr string) {
	p.mu.Lock()
	p.backend = addr
	p.mu.Unlock()
}

func (p *proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		go p.forward(client)
	}
}

func (p *proxy) forward(client net.Conn) {
	p.mu.Lock()
	backend := p.backend
	p.mu.Unlock()
	// A proxy closing a connection has no one to report a failed close to: the peer sees the
	// connection end either way.
	if backend == "" {
		_ = client.Close()
		return
	}
	server, err := net.DialTimeout("tcp", backend, 2*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	_ = client.Close()
	_ = server.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// dropAll closes every forwarded connection.
func (p *proxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close() // dropping it is the point; a failed close leaves nothing to do
	}
}

func (p *proxy) close() {
	_ = p.ln.Close() // only ends the accept loop; nothing was written through it
	p.dropAll()
}

// exitKind says how a process ended.
type exitKind int

const (
	exitKilled exitKind = iota // SIGKILL sent by the harness
	exitFault                  // SIGKILL the process sent itself at a fault point
	exitOther                  // anything else: an error exit (the database was down at start, say)
)

// process is one supervised devui process (the serve, or a worker). Whenever it dies, it is
// started again, after restartDelay, until stop.
type process struct {
	name, role   string
	bin          string
	args, env    []string
	logPath      string
	restartDelay func() time.Duration
	// onExit is told of each death (not of the stop at the end).
	onExit func(p *process, pid int, kind exitKind, status string, at time.Time)

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	killing  bool // the harness sent the running incarnation SIGKILL
	stopping bool
	done     chan struct{} // closed when supervise returns
	// away holds the times it was dead or paused; deadSince and pausedSince are when the current
	// ones began.
	away                   []outage
	deadSince, pausedSince time.Time
}

// pause stops the live incarnation, if it is pid, with SIGSTOP, and notes it until resume.
func (p *process) pause(pid int) bool {
	if !p.signal(pid, syscall.SIGSTOP) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pausedSince = time.Now()
	return true
}

// resume lets a paused incarnation go on with SIGCONT.
func (p *process) resume(pid int) {
	p.signal(pid, syscall.SIGCONT)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.pausedSince.IsZero() {
		p.away = append(p.away, outage{from: p.pausedSince, to: time.Now()})
		p.pausedSince = time.Time{}
	}
}

// upThroughout reports whether the process was alive and not paused from from to to.
func (p *process) upThroughout(from, to time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, since := range []time.Time{p.deadSince, p.pausedSince} {
		if !since.IsZero() && since.Before(to) {
			return false
		}
	}
	for _, o := range p.away {
		if o.from.Before(to) && o.to.After(from) {
			return false
		}
	}
	return true
}

// supervise starts the process and starts it again each time it dies, until stop.
func (p *process) supervise(log *slog.Logger) {
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		for {
			err := p.startOnce()
			if errors.Is(err, errStopping) {
				return
			}
			if err != nil {
				log.Error("start process", "process", p.name, "err", err)
				time.Sleep(time.Second)
				continue
			}
			p.mu.Lock()
			cmd, exited := p.cmd, p.exited
			p.mu.Unlock()
			<-exited
			p.mu.Lock()
			killing, stopping := p.killing, p.stopping
			p.killing = false
			p.deadSince = time.Now()
			p.mu.Unlock()
			if stopping {
				return
			}
			kind, status := classify(cmd.ProcessState, killing)
			if p.onExit != nil {
				p.onExit(p, cmd.Process.Pid, kind, status, time.Now())
			}
			if d := p.restartDelay(); d > 0 {
				time.Sleep(d)
			}
			p.mu.Lock()
			stopping = p.stopping
			p.mu.Unlock()
			if stopping {
				return
			}
		}
	}()
}

func classify(ps *os.ProcessState, killing bool) (exitKind, string) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		if killing {
			return exitKilled, "killed"
		}
		return exitFault, "killed itself"
	}
	return exitOther, ps.String()
}

var errStopping = errors.New("stopping")

// startOnce starts an incarnation, unless stop was called: under p.mu, so that stop either sees
// it or prevents it.
func (p *process) startOnce() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return errStopping
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return errors.Join(err, logf.Close())
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		// The child wrote the log through its own descriptor; closing ours loses nothing.
		_ = logf.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	if !p.deadSince.IsZero() {
		p.away = append(p.away, outage{from: p.deadSince, to: time.Now()})
		p.deadSince = time.Time{}
	}
	return nil
}

// running returns the pid of the live incarnation.
func (p *process) running() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.stopping || p.killing {
		return 0, false
	}
	select {
	case <-p.exited:
		return 0, false
	default:
		return p.cmd.Process.Pid, true
	}
}

// signal sends sig to the live incarnation, if it is pid, and reports whether it did.
func (p *process) signal(pid int, sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process.Pid != pid || p.stopping {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
	}
	if sig == syscall.SIGKILL {
		p.killing = true
	}
	return p.cmd.Process.Signal(sig) == nil
}

// kill SIGKILLs the live incarnation and waits until it is gone. It returns its pid.
func (p *process) kill() (int, bool) {
	pid, ok := p.running()
	if !ok || !p.signal(pid, syscall.SIGKILL) {
		return 0, false
	}
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	<-exited
	return pid, true
}

// stop ends supervision: SIGTERM (SIGCONT first, in case it is paused), then SIGKILL after 40
// seconds. supervise may start it again afterwards.
func (p *process) stop() {
	p.mu.Lock()
	p.stopping = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if p.done != nil {
		<-p.done
	}
	// Ready for supervise again.
	p.mu.Lock()
	p.cmd, p.exited, p.stopping, p.killing = nil, nil, false, false
	p.mu.Unlock()
}

// faultLines counts the fault points that fired in a process's log (devui logs JSON here).
func faultLines(path string, into map[string]int) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "fault injected") {
			continue
		}
		if i := strings.Index(line, `"point":"`); i >= 0 {
			rest := line[i+len(`"point":"`):]
			if j := strings.IndexByte(rest, '"'); j >= 0 {
				into[rest[:j]]++
			}
		}
	}
	return sc.Err()
}

// panics returns the lines of a process's log that start a Go panic or a fatal runtime error.
func panics(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			out = append(out, line)
		}
	}
	return out, nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// sleepCtx waits d, or less when ctx ends; it reports whether the whole wait passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
