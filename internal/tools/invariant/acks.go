package invariant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// The acks file is JSON lines of Ack: written by whoever drove the load
// (cmd/orderload, the e2e tests), read by `orderd verify --acks`.

// WriteAcks writes acks to path, one JSON object a line.
func WriteAcks(path string, acks []Ack) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, a := range acks {
		if err := enc.Encode(a); err != nil {
			return fmt.Errorf("encode ack: %w", err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write acks %s: %w", path, err)
	}
	return nil
}

// ReadAcks reads a file written by WriteAcks.
func ReadAcks(path string) ([]Ack, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read acks: %w", err)
	}
	var acks []Ack
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var a Ack
		if err := dec.Decode(&a); err != nil {
			return nil, fmt.Errorf("read acks %s: %w", path, err)
		}
		acks = append(acks, a)
	}
	return acks, nil
}
