package outbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A publication that times out says why the connections fail, until one
// succeeds.
func TestConnWatchSaysWhyConnectionsFail(t *testing.T) {
	var w connWatch
	if r := w.reason(); r != "" {
		t.Fatalf("no connection yet: %q, want nothing", r)
	}
	w.OnBrokerConnect(kgo.BrokerMetadata{}, 0, nil, errors.New("SASL_AUTHENTICATION_FAILED: SASL Authentication failed."))
	if r := w.reason(); !strings.Contains(r, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("after a refused login: %q, want it named", r)
	}
	w.OnBrokerConnect(kgo.BrokerMetadata{}, 0, nil, nil)
	if r := w.reason(); r != "" {
		t.Fatalf("after a connection succeeded: %q, want nothing", r)
	}
}
