package upgradeserver

import (
	"log"
	"strings"

	"github.com/rs/zerolog"
)

// newErrorLog routes net/http's own messages, TLS handshake errors among
// them ("http: TLS handshake error from <IP>: remote error: tls: bad
// certificate", the line the AIStor troubleshooting steps tell users to look
// for), into the structured log.
func newErrorLog(l zerolog.Logger) *log.Logger {
	return log.New(errorLogWriter{l}, "", 0)
}

type errorLogWriter struct{ log zerolog.Logger }

func (w errorLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	ev := w.log.Warn()
	if strings.Contains(msg, "TLS handshake error") {
		ev = ev.Str("reason", "tls_handshake")
	}
	ev.Msg(msg)
	return len(p), nil
}
