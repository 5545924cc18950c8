package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuUse is the CPU time a load cost each party: the server (Loupe's devui serve, or Jaeger),
// PostgreSQL (the postmaster and every process under it) and this client. Divided by the spans
// stored, it is a figure that holds up on a machine shared with other work, where spans/s does
// not: it says where the cores went.
type cpuUse struct {
	server, pg, client time.Duration
	measured           bool // the server's or PostgreSQL's pid was given
}

// cpuMeter reads cpuUse at the start of a load, and what it cost at the end.
type cpuMeter struct {
	serverPID, pgPID   int
	server, pg, client time.Duration
}

func startCPU(serverPID, pgPID int) *cpuMeter {
	m := &cpuMeter{serverPID: serverPID, pgPID: pgPID}
	m.server, m.pg, m.client = m.read()
	return m
}

func (m *cpuMeter) read() (server, pg, client time.Duration) {
	if m.serverPID > 0 {
		server = procCPU(m.serverPID)
	}
	if m.pgPID > 0 {
		for _, pid := range procTree(m.pgPID) {
			pg += procCPU(pid)
		}
	}
	return server, pg, procCPU(os.Getpid())
}

// stop returns what the load cost since startCPU. PostgreSQL backends that exited meanwhile are
// not counted (the pools here keep theirs).
func (m *cpuMeter) stop() cpuUse {
	server, pg, client := m.read()
	return cpuUse{server: server - m.server, pg: pg - m.pg, client: client - m.client,
		measured: m.serverPID > 0 || m.pgPID > 0}
}

// perSpan formats d as microseconds per span, "-" when not measured.
func perSpan(d time.Duration, spans int64, measured bool) string {
	if !measured || spans == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(d.Microseconds())/float64(spans))
}

// procCPU is a process's user and system time, from /proc; 0 when unreadable.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the 14th and 15th fields.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// procTree is pid and its children (PostgreSQL's backends and workers are the postmaster's).
func procTree(pid int) []int {
	out := []int{pid}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}
