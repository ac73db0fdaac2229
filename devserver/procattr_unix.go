//go:build unix && !linux

package devserver

import "syscall"

// sysProcAttr puts the dev server in its own process group. Without Linux's
// parent death signal, a SIGKILLed weft can leave the dev server running;
// Start refuses a busy port, which names the leftover.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
