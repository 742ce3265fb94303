//go:build !unix

package main

import "time"

// processCPU cannot read the process's CPU time on this platform; the CPU
// time table then shows no figures.
func processCPU() (time.Duration, bool) { return 0, false }
