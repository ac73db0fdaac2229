//go:build !unix

package devserver

import (
	"os"
	"syscall"
)

const (
	terminate = 0
	kill      = 1
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup stops p: there are no process groups here, so both signals kill.
func signalGroup(p *os.Process, _ int) error { return p.Kill() }
