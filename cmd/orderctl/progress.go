package main

import (
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows how far a long command is, on stderr. It is drawn only
// when stderr is a terminal and --json is off, so it never mixes with a
// result and never reaches a script's captured stderr; otherwise it does
// nothing.
type progress interface {
	Add(n int) error
	Describe(s string)
	Finish() error
}

// newProgress is a bar of total steps (-1: unknown, a spinner with a count).
func (a *app) newProgress(total int, what string) progress {
	if !a.progressOK || a.json {
		return noProgress{}
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSpinnerType(14),
	)
}

type noProgress struct{}

func (noProgress) Add(int) error   { return nil }
func (noProgress) Describe(string) {}
func (noProgress) Finish() error   { return nil }
