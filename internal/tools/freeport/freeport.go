// Package freeport hands out loopback addresses for child processes that
// will listen on them: the e2e tests' orderd instances and orderbench's.
//
// A port found by binding port 0 and closing the listener comes from the
// kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
// default), the same range the kernel takes source ports of outgoing
// connections from. Between the close and the child's bind, any outgoing
// connection on the machine (each orderd opens dozens to Cassandra and
// Kafka) can take it, and the child exits with "address already in use".
// Starting three instances at once makes that window wide. So the ports
// here come from below the ephemeral range, are checked free by a listen,
// and are never handed out twice by one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// The range ports are taken from: above the well-known and registered ports
// of everything this project starts (Cassandra 7000/9042/7199, Kafka
// 19092-19093), below the default ephemeral range.
const (
	low  = 20000
	high = 32767
)

var (
	mu     sync.Mutex
	next   = low + rand.IntN(high-low) // processes started together start apart
	issued = map[int]bool{}
)

// Addr is "127.0.0.1:port" for a port no one listened on when it was
// checked, and that this process has not handed out before.
func Addr() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	for range high - low + 1 {
		port := next
		next++
		if next > high {
			next = low
		}
		if issued[port] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken
		}
		if err := l.Close(); err != nil {
			return "", fmt.Errorf("close the probe listener on %s: %w", addr, err)
		}
		issued[port] = true
		return addr, nil
	}
	return "", fmt.Errorf("no free loopback port between %d and %d", low, high)
}
