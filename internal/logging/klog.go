// Package logging routes client-go's klog output into the operator's
// zerolog logger, so every line the operator writes is one JSON object
// that an SRE can grep and parse.
package logging

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// RouteKlog sends klog (reflectors, leader election, event broadcasting)
// to log, under component "client-go". klog's verbosity levels above 0 are
// debug lines.
func RouteKlog(log zerolog.Logger) {
	klog.SetLogger(logr.New(&sink{log: log.With().Str("component", "client-go").Logger()}))
}

type sink struct {
	log    zerolog.Logger
	name   string
	values []any
}

func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool {
	if level == 0 {
		return s.log.GetLevel() <= zerolog.InfoLevel
	}
	return s.log.GetLevel() <= zerolog.DebugLevel && level <= 4
}

func (s *sink) Info(level int, msg string, kv ...any) {
	ev := s.log.Info()
	if level > 0 {
		ev = s.log.Debug()
	}
	s.fields(ev, kv).Msg(msg)
}

func (s *sink) Error(err error, msg string, kv ...any) {
	s.fields(s.log.Error().Err(err), kv).Msg(msg)
}

func (s *sink) fields(ev *zerolog.Event, kv []any) *zerolog.Event {
	if s.name != "" {
		ev = ev.Str("logger", s.name)
	}
	all := append(append([]any{}, s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		ev = ev.Interface(fmt.Sprint(all[i]), all[i+1])
	}
	return ev
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(append([]any{}, s.values...), kv...)
	return &c
}

func (s *sink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}
