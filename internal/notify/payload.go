package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Payload is a webhook's body. Slack's incoming webhooks show Text (Slack's mrkdwn, with a link
// to the inbox) and ignore the rest; other receivers read the structured fields.
type Payload struct {
	Text  string `json:"text"`
	Event string `json:"event"`
	// ID is the notification's idempotency key, as in IdempotencyHeader.
	ID         string    `json:"id"`
	OccurredAt time.Time `json:"occurred_at"`
	Interrupt  Interrupt `json:"interrupt"`
}

// Interrupt is what a payload tells about the interrupt.
type Interrupt struct {
	ID     string          `json:"id"`
	RunID  string          `json:"run_id"`
	Action string          `json:"action"`
	Tool   string          `json:"tool"`
	Ref    string          `json:"ref,omitempty"`
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input,omitempty"`
	// Message is the interrupt's metadata.message, the question the tool asks.
	Message string `json:"message,omitempty"`
	// URL is the interrupt's page in the inbox.
	URL string `json:"url"`
	// Rule is the policy rule that routed or decided it.
	Rule        string     `json:"rule,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	ResolvedBy  string     `json:"resolved_by,omitempty"`
	Comment     string     `json:"comment,omitempty"`
	EscalatedTo string     `json:"escalated_to,omitempty"`
}

// ItemURL is an interrupt's page in the inbox under base (relative when base is empty).
func ItemURL(base, interruptID string) string {
	return strings.TrimRight(base, "/") + "/inbox/items/" + interruptID
}

// Body fills in p.Text for p's event and encodes p.
func (p *Payload) Body() ([]byte, error) {
	it := p.Interrupt
	what := fmt.Sprintf("*%s* in %s", mrkdwn(it.Tool), mrkdwn(it.Action))
	var text string
	switch p.Event {
	case EventPending:
		text = what + " waits for a reviewer"
	case EventEscalated:
		text = what + " was escalated to " + mrkdwn(it.EscalatedTo)
	case EventExpired:
		text = what + ": nobody decided in time, so it was " + mrkdwn(it.Status)
		if it.ResolvedBy != "" {
			text += " by " + mrkdwn(it.ResolvedBy)
		}
	default:
		text = what + ": " + mrkdwn(p.Event)
	}
	if it.Message != "" {
		text += ": " + mrkdwn(it.Message)
	}
	if it.ExpiresAt != nil && p.Event != EventExpired {
		text += fmt.Sprintf(" (decided by policy at %s)", it.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if strings.HasPrefix(it.URL, "http://") || strings.HasPrefix(it.URL, "https://") {
		text += fmt.Sprintf(". <%s|Open it in the inbox>", it.URL)
	} else {
		text += ". Inbox: " + it.URL
	}
	p.Text = "Loupe: " + text
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode webhook payload: %w", err)
	}
	return b, nil
}

// mrkdwn escapes the three characters Slack's mrkdwn reserves.
func mrkdwn(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
