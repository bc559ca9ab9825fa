package manager

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/deckhand-dev/deckhand/internal/webhookcert"
)

// What net/http writes through the standard logger becomes one structured
// entry a line: a refusal before the certificate is issued at debug level,
// any other handshake error at info level with the remote address and the
// reason, anything else at info level as it is.
func TestStandardLogLinesBecomeStructuredEntries(t *testing.T) {
	for line, want := range map[string]string{
		"http: TLS handshake error from 127.0.0.1:40122: " + webhookcert.ErrNotIssued.Error() + "\n": `"level"=1 "msg"="TLS handshake refused: no serving certificate yet" "remote"="127.0.0.1:40122"`,
		"http: TLS handshake error from [::1]:8443: remote error: tls: bad certificate\n":            `"level"=0 "msg"="TLS handshake error" "remote"="[::1]:8443" "reason"="remote error: tls: bad certificate"`,
		"http: TLS handshake error from 10.0.0.7:5100: EOF\n":                                        `"level"=0 "msg"="TLS handshake error" "remote"="10.0.0.7:5100" "reason"="EOF"`,
		"http: superfluous response.WriteHeader call\n":                                              `"level"=0 "msg"="http: superfluous response.WriteHeader call"`,
	} {
		var got []string
		w := stdlogWriter{l: funcr.New(func(_, args string) { got = append(got, args) }, funcr.Options{Verbosity: 1})}
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Errorf("Write(%q) = %d, %v", line, n, err)
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%q logged %s; want %s", line, strings.Join(got, " | "), want)
		}
	}
}
