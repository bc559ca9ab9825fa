// Package notify delivers notifications of incidents to where people look:
// a generic HTTPS webhook (a JSON body), a Slack-compatible incoming
// webhook, or a CloudEvents receiver (structured mode over HTTP).
//
// Delivery is at least once: an Outbox retries a notification with
// exponential backoff until a receiver answers 2xx, or until it is older
// than MaxAge, and tells its caller once what became of it. Every
// notification carries an idempotency key (the Idempotency-Key header, and
// the CloudEvents id), so a receiver that saw it already can drop the
// repeat. The receivers are Sinks the platform team configures.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Format is how a notification is written for a receiver.
type Format string

// Formats a Target may take.
const (
	// FormatJSON posts the Message as JSON.
	FormatJSON Format = "JSON"
	// FormatSlack posts {"text": ...}, what Slack's and compatible
	// incoming webhooks (Mattermost, Rocket.Chat) read.
	FormatSlack Format = "Slack"
	// FormatCloudEvents posts a CloudEvents 1.0 event in structured mode
	// (application/cloudevents+json), the Message as its data.
	FormatCloudEvents Format = "CloudEvents"
)

// Target is one receiver.
type Target struct {
	// Name names the target in metrics and errors.
	Name   string
	URL    string
	Format Format
	// Token, when set, is sent as a bearer token (read from a Secret by
	// the caller).
	Token string
}

// Message is one notification of an incident.
type Message struct {
	// Key is the idempotency key: the same incident window, the same key,
	// however often it is sent.
	Key string `json:"key"`
	// Type is "opened" (the window's first failure) or "closed" (its
	// summary, once no failure followed for the window's length).
	Type      string    `json:"type"`
	Namespace string    `json:"namespace"`
	Source    string    `json:"source"`
	Pod       string    `json:"pod"`
	Container string    `json:"container,omitempty"`
	Reason    string    `json:"reason"`
	Record    string    `json:"record,omitempty"`
	Count     int32     `json:"count"`
	ExitCode  int32     `json:"exitCode,omitempty"`
	FirstTime time.Time `json:"firstTime"`
	LastTime  time.Time `json:"lastTime"`
	Summary   string    `json:"summary,omitempty"`
}

// Types of Message.
const (
	TypeOpened = "opened"
	TypeClosed = "closed"
)

// text is the one line a chat receiver shows.
func (m Message) text() string {
	where := m.Namespace + "/" + m.Pod
	if m.Container != "" {
		where += " (" + m.Container + ")"
	}
	if m.Type == TypeClosed {
		return fmt.Sprintf("%s: %s %d times between %s and %s; quiet since", where, m.Reason, m.Count,
			m.FirstTime.UTC().Format(time.RFC3339), m.LastTime.UTC().Format(time.RFC3339))
	}
	line := fmt.Sprintf("%s: %s (exit %d) at %s", where, m.Reason, m.ExitCode, m.LastTime.UTC().Format(time.RFC3339))
	if m.Summary != "" {
		line += ": " + m.Summary
	}
	return line
}

const contentJSON = "application/json"

// body writes m as f and returns it with its content type.
func body(f Format, m Message) ([]byte, string, error) {
	switch f {
	case FormatSlack:
		b, err := json.Marshal(map[string]string{"text": m.text()})
		return b, contentJSON, err
	case FormatCloudEvents:
		b, err := json.Marshal(map[string]any{
			"specversion":     "1.0",
			"id":              m.Key,
			"source":          "/deckhand/" + m.Namespace + "/" + m.Source,
			"type":            "dev.deckhand.podincident." + m.Type,
			"subject":         m.Pod,
			"time":            m.LastTime.UTC().Format(time.RFC3339Nano),
			"datacontenttype": "application/json",
			"data":            m,
		})
		return b, "application/cloudevents+json", err
	case FormatJSON, "":
		b, err := json.Marshal(m)
		return b, contentJSON, err
	}
	return nil, "", fmt.Errorf("format %q is none of JSON, Slack, CloudEvents", f)
}

// Send makes one attempt to deliver m to t through c: nil once the
// receiver answered 2xx.
func Send(ctx context.Context, c *http.Client, t Target, m Message) error {
	b, contentType, err := body(t.Format, m)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", m.Key)
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", t.Name, resp.Status)
	}
	return nil
}
