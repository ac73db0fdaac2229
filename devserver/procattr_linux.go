//go:build linux

package devserver

import "syscall"

// sysProcAttr puts the dev server in its own process group (a terminal's
// Ctrl-C reaches weft only, which stops everything in order) and asks the
// kernel to SIGKILL it when weft dies, even by SIGKILL, so no orphaned dev
// server keeps the ports and the SQLite file. Pdeathsig fires when the
// creating OS thread exits; Go only ends threads locked with LockOSThread,
// which Start never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
