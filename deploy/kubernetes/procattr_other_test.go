//go:build !linux

package kubernetes

import "syscall"

// dieWithParent: only Linux can tie a child's life to its parent's; on
// other systems the tests' cleanup stops the servers.
func dieWithParent() *syscall.SysProcAttr { return nil }
