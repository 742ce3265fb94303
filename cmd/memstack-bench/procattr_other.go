//go:build !linux

package main

import "syscall"

// workerProcAttr returns nil: without a parent-death signal a serving
// process of the scale benchmark ends when it reads EOF on its stdin,
// which it does when the parent dies.
func workerProcAttr() *syscall.SysProcAttr { return nil }
