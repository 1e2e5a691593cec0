package oci

import "time"

// phases times the steps of a pull for the verbose log.
type phases struct {
	last time.Time
	kv   []any
}

func newPhases() *phases { return &phases{last: time.Now()} }

func (p *phases) mark(name string) {
	now := time.Now()
	p.kv = append(p.kv, name, now.Sub(p.last).Round(time.Millisecond).String())
	p.last = now
}

func (p *phases) attrs() []any { return p.kv }
