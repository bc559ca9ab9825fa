package notify

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Sinks are the receivers the platform team configures for the manager (a
// file, usually mounted from a Secret: --incident-sinks-file), by name. A
// PodBugger names the sinks its incidents go to; it cannot name a URL. So a
// tenant cannot make the manager post to an address of its choosing (the
// cloud's metadata service, an internal API), and the manager reads no
// Secret of a tenant's namespace for a receiver's credentials.
type Sinks map[string]Sink

// Sink is one receiver and the namespaces whose PodBuggers may use it.
type Sink struct {
	Target
	// Namespaces are the namespaces whose PodBuggers may name the sink;
	// every namespace when empty.
	Namespaces []string
}

// sinksFile is the file's shape:
//
//	sinks:
//	- name: oncall
//	  format: Slack            # JSON (default), Slack or CloudEvents
//	  url: https://hooks.slack.com/services/…
//	  token: …                 # optional: sent as a bearer token
//	  namespaces: [team-a]     # optional: who may name it; all when omitted
type sinksFile struct {
	Sinks []struct {
		Name       string   `json:"name"`
		Format     Format   `json:"format"`
		URL        string   `json:"url"`
		Token      string   `json:"token"`
		Namespaces []string `json:"namespaces"`
	} `json:"sinks"`
}

// Bounds of a sinks file: what the manager holds of it stays small.
const (
	maxSinksFileBytes = 64 << 10
	maxSinks          = 64
	maxURLBytes       = 2048
	maxTokenBytes     = 4096
)

// LoadSinks reads the sinks file at path; none when path is empty.
func LoadSinks(path string) (Sinks, error) {
	if path == "" {
		return Sinks{}, nil
	}
	f, err := os.Open(path) //nolint:gosec // the operator names the file, by a flag
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxSinksFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSinksFileBytes {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxSinksFileBytes)
	}
	s, err := ParseSinks(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseSinks reads a sinks file's content; an error names the field at
// fault (sinks[2].url: …).
func ParseSinks(b []byte) (Sinks, error) {
	var f sinksFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, err
	}
	if len(f.Sinks) > maxSinks {
		return nil, fmt.Errorf("sinks: %d sinks, at most %d", len(f.Sinks), maxSinks)
	}
	out := make(Sinks, len(f.Sinks))
	var errs []error
	for i, s := range f.Sinks {
		field := func(name string) string { return fmt.Sprintf("sinks[%d].%s", i, name) }
		if msgs := validation.IsDNS1123Label(s.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: %q: %s", field("name"), s.Name, msgs[0]))
		} else if _, dup := out[s.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: %q is named twice", field("name"), s.Name))
		}
		if s.Format == "" {
			s.Format = FormatJSON
		}
		if !slices.Contains([]Format{FormatJSON, FormatSlack, FormatCloudEvents}, s.Format) {
			errs = append(errs, fmt.Errorf("%s: %q is none of JSON, Slack, CloudEvents", field("format"), s.Format))
		}
		if err := checkURL(s.URL); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field("url"), err))
		}
		if len(s.Token) > maxTokenBytes {
			errs = append(errs, fmt.Errorf("%s: over %d bytes", field("token"), maxTokenBytes))
		}
		for j, ns := range s.Namespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s[%d]: %q: %s", field("namespaces"), j, ns, msgs[0]))
			}
		}
		out[s.Name] = Sink{Target: Target{Name: s.Name, URL: s.URL, Format: s.Format, Token: s.Token}, Namespaces: s.Namespaces}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// checkURL says what is wrong with a sink's URL, without repeating it: a
// webhook's URL often holds its secret (Slack's does).
func checkURL(raw string) error {
	if len(raw) > maxURLBytes {
		return fmt.Errorf("over %d bytes", maxURLBytes)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("the scheme must be https (or http), not %q", u.Scheme)
	case u.Host == "":
		return errors.New("no host")
	case u.User != nil:
		return errors.New("credentials in the URL are not allowed: use token")
	}
	return nil
}

// ErrUnknownSink is what For says of a name no sink has, or of a sink the
// namespace may not use.
var ErrUnknownSink = errors.New("no such sink")

// For returns the receiver of the sink named name for a PodBugger of
// namespace ns.
func (s Sinks) For(ns, name string) (Target, error) {
	sink, ok := s[name]
	if !ok || (len(sink.Namespaces) > 0 && !slices.Contains(sink.Namespaces, ns)) {
		return Target{}, fmt.Errorf("%w %q for namespace %s", ErrUnknownSink, name, ns)
	}
	return sink.Target, nil
}
