package runs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Fault points: moments between two writes of an execution where the crash harness (make chaos)
// kills the process, to prove that no crash there loses, repeats or corrupts anything.
const (
	// FaultAfterFetch: River handed this worker the run's job; the run's lease is not taken yet.
	FaultAfterFetch = "after-fetch"
	// FaultMidModel: the model answered; its response is not recorded yet.
	FaultMidModel = "mid-model"
	// FaultMidTool: a tool acted; its result is not recorded yet.
	FaultMidTool = "mid-tool"
	// FaultInterruptedCheckpoint: the interrupted turn's history is written in the transaction that
	// will hold the interrupts; nothing is committed yet.
	FaultInterruptedCheckpoint = "interrupted-checkpoint"
	// FaultAfterResolve: a reviewer's decision is written in the transaction that will enqueue the
	// resume; nothing is committed yet.
	FaultAfterResolve = "after-resolve"
	// FaultDecidedAtOnce: an execution's interrupts were all decided in the transaction that
	// stored them (a replay's recorded decisions, the policy's rules), which committed with the
	// run queued again; the same job has not taken the run again yet.
	FaultDecidedAtOnce = "decided-at-once"
)

var faultPoints = []string{FaultAfterFetch, FaultMidModel, FaultMidTool, FaultInterruptedCheckpoint, FaultAfterResolve, FaultDecidedAtOnce}

// ParseFaults reads LOUPE_FAULTS's form, "point=probability,…" (after-fetch=0.05,mid-tool=0.1),
// for Config.Faults. An empty string is no faults: an empty map.
func ParseFaults(s string) (map[string]float64, error) {
	out := map[string]float64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		name, p, ok := strings.Cut(strings.TrimSpace(item), "=")
		prob, err := strconv.ParseFloat(p, 64)
		if !ok || err != nil || prob < 0 || prob > 1 {
			return nil, fmt.Errorf("fault %q: want point=probability with a probability from 0 to 1", item)
		}
		known := false
		for _, f := range faultPoints {
			known = known || f == name
		}
		if !known {
			return nil, fmt.Errorf("fault %q: the points are %s", name, strings.Join(faultPoints, ", "))
		}
		out[name] = prob
	}
	return out, nil
}

// fault kills this process at point, with the probability Config.Faults gives it: SIGKILL, so
// nothing runs after it, as in a real crash.
func (s *Service) fault(point string) {
	if p, ok := s.cfg.Faults[point]; ok && rand.Float64() < p {
		s.log.Warn("fault injected: killing this process", "point", point)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
