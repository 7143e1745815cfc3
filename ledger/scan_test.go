package ledger

import "testing"

// A scan position round-trips, and a skip past a chunk is refused.
func TestScanPosition(t *testing.T) {
	for _, p := range []scanPosition{{}, {chunk: []byte("state"), skip: 7}, {chunk: []byte{0, 1, 2}, skip: scanChunk - 1}} {
		got, err := decodeScanPosition(p.encode())
		if err != nil || got.skip != p.skip || string(got.chunk) != string(p.chunk) {
			t.Errorf("%+v: decoded %+v, %v", p, got, err)
		}
	}
	if _, err := decodeScanPosition(scanPosition{chunk: []byte("s"), skip: scanChunk}.encode()); err == nil {
		t.Error("a skip of a whole chunk accepted")
	}
}
