package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrIsListenableBelowTheEphemeralRangeAndNeverRepeated: every address
// can be listened on, lies in [low, high], and none comes twice.
func TestAddrIsListenableBelowTheEphemeralRangeAndNeverRepeated(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if host != "127.0.0.1" || port < low || port > high {
			t.Fatalf("%s: want 127.0.0.1 and a port in [%d, %d]", addr, low, high)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on a handed-out address: %v", err)
		}
		l.Close()
	}
}

// TestAddrSkipsAPortSomeoneListensOn: a port another listener holds is
// passed over, even when it is the next one in turn.
func TestAddrSkipsAPortSomeoneListensOn(t *testing.T) {
	var l net.Listener
	for port := low; l == nil && port <= high; port++ {
		l, _ = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if l != nil {
			mu.Lock()
			next = port
			mu.Unlock()
		}
	}
	if l == nil {
		t.Fatal("no port in the range could be listened on")
	}
	defer l.Close()
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if addr == l.Addr().String() {
		t.Fatalf("handed out %s, which is being listened on", addr)
	}
}
