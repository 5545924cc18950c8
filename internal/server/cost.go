package server

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/loupe-dev/loupe/internal/pricing"
	"github.com/loupe-dev/loupe/internal/store"
)

// runCost is a run's cost by the server's prices; false when a model it called has no price.
func (s *Server) runCost(r *store.Run) (float64, bool) {
	return s.prices.Cost(r.Usage)
}

// costUSD is a cost as the API sends it: null when it is unknown, never a guess.
func costUSD(usd float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	return &usd
}

// costText renders a cost for people: "—" when it is unknown, "$0" for nothing, four decimals
// under a dollar (model calls cost fractions of a cent), two above.
func costText(usd float64, ok bool) string {
	switch {
	case !ok:
		return "—"
	case usd == 0:
		return "$0"
	case usd < 0.00005:
		return "<$0.0001"
	case usd < 1:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("$%.4f", usd), "0"), ".")
	case usd < 100_000:
		return fmt.Sprintf("$%.2f", usd)
	}
	return fmt.Sprintf("$%.0f", math.Round(usd))
}

// pricesOf is the prices a usage is priced by, for a tooltip: each model with its price, or "no
// price" — what makes a cost unknown.
func pricesOf(t *pricing.Table, usage map[string]pricing.Tokens) string {
	var b strings.Builder
	for _, m := range slices.Sorted(maps.Keys(usage)) {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		n := usage[m]
		name := m
		if name == "" {
			name = "(unnamed model)"
		}
		if p, ok := t.Lookup(m); ok {
			fmt.Fprintf(&b, "%s: %d in × $%g + %d out × $%g per million", name, n.Input, p.Input, n.Output, p.Output)
		} else {
			fmt.Fprintf(&b, "%s: no price (add it to the prices file, serve --prices)", name)
		}
	}
	return b.String()
}
