package kubernetes

import "syscall"

// dieWithParent has the kernel kill a started server when the test
// process dies, so an interrupted run leaves no etcd or kube-apiserver.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
