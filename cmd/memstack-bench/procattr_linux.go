//go:build linux

package main

import "syscall"

// workerProcAttr makes a serving process of the scale benchmark die with
// the parent (a parent-death signal), so that none outlives a killed run.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
