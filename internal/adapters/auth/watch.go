package auth

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// FileLoader feeds a file's contents to load: once at start (NewFileLoader,
// whose error stops the start) and again whenever the contents change (Watch), so
// a key can be added or revoked without a restart. A changed file that does
// not parse is logged and ignored: the previous contents stay in force.
type FileLoader struct {
	Path string
	// What the file is, for logs ("api keys", "jwks").
	What string
	load func([]byte) error
	last []byte
	bad  []byte // contents that did not load: logged once, not every interval
}

// NewFileLoader loads path now.
func NewFileLoader(path, what string, load func([]byte) error) (*FileLoader, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", what, err)
	}
	if err := load(data); err != nil {
		return nil, fmt.Errorf("%s file %s: %w", what, path, err)
	}
	return &FileLoader{Path: path, What: what, load: load, last: data}, nil
}

// Watch rereads the file every interval until ctx ends, and reloads it
// when its contents changed.
func (f *FileLoader) Watch(ctx context.Context, interval time.Duration, log *slog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		_ = f.reload(log) // logs its own outcome; the loaded contents stay on error
	}
}

var errUnchanged = fmt.Errorf("unchanged")

func (f *FileLoader) reload(log *slog.Logger) error {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		log.Error("could not reread; the loaded contents stay in force", "file", f.Path, "what", f.What, "error", err)
		return err
	}
	if bytes.Equal(data, f.last) || bytes.Equal(data, f.bad) {
		return errUnchanged
	}
	if err := f.load(data); err != nil {
		f.bad = data
		log.Error("changed file does not load; the previous contents stay in force", "file", f.Path, "what", f.What, "error", err)
		return err
	}
	f.last = data
	log.Info("reloaded", "file", f.Path, "what", f.What)
	return nil
}
