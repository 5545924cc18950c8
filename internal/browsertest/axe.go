package browsertest

import (
	"context"
	_ "embed" // axe-core, vendored under testdata
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// axeSource is axe-core 4.10.3 from npm, unmodified (testdata/axe-core, MPL-2.0).
//
//go:embed testdata/axe-core/axe.min.js
var axeSource string

// AxeReadabilityRules are the axe-core rules that make a page readable and operable by name:
// colour contrast, and every control, link, image and frame having an accessible name.
var AxeReadabilityRules = []string{
	"color-contrast", "label", "button-name", "link-name", "select-name", "input-button-name",
	"aria-input-field-name", "aria-toggle-field-name", "aria-command-name", "image-alt",
	"svg-img-alt", "frame-title", "form-field-multiple-labels",
}

// AxeViolation is one rule a page broke, with the elements that broke it.
type AxeViolation struct {
	ID    string    `json:"id"`
	Help  string    `json:"help"`
	Nodes []AxeNode `json:"nodes"`
}

// AxeNode is one element that broke a rule.
type AxeNode struct {
	Target  []string `json:"target"`
	HTML    string   `json:"html"`
	Summary string   `json:"failureSummary"`
}

// String reads a violation as a test failure should: the rule, and each element with why.
func (v AxeViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s):", v.ID, v.Help)
	for _, n := range v.Nodes {
		html := n.HTML
		if len(html) > 160 {
			html = html[:160] + "…"
		}
		fmt.Fprintf(&b, "\n    %s %s\n      %s", strings.Join(n.Target, " "), html, strings.ReplaceAll(n.Summary, "\n", " "))
	}
	return b.String()
}

// Axe runs axe-core's rules on the page in the tab of ctx and returns what they found. DevTools
// evaluates axe's source in the page, which a strict CSP does not block.
func Axe(rules []string, out *[]AxeViolation) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var loaded bool
		if err := chromedp.Evaluate(`typeof axe !== "undefined"`, &loaded).Do(ctx); err != nil {
			return err
		}
		if !loaded {
			if err := chromedp.Evaluate(axeSource+";true", nil).Do(ctx); err != nil {
				return fmt.Errorf("load axe-core: %w", err)
			}
		}
		names, _ := json.Marshal(rules)
		var raw string
		err := chromedp.Evaluate(`axe.run(document, {runOnly: {type: "rule", values: `+string(names)+`}, resultTypes: ["violations"]})
			.then(r => JSON.stringify(r.violations.map(v => ({id: v.id, help: v.help,
				nodes: v.nodes.map(n => ({target: n.target, html: n.html, failureSummary: n.failureSummary}))}))))`,
			&raw, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }).Do(ctx)
		if err != nil {
			return fmt.Errorf("run axe-core: %w", err)
		}
		return json.Unmarshal([]byte(raw), out)
	})
}

// ColorScheme makes the tab's pages match prefers-color-scheme: dark or light.
func ColorScheme(scheme string) chromedp.Action {
	return emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}})
}
