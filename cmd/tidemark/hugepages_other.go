//go:build !linux

package main

// backHeap is Linux's transparent huge pages; elsewhere there is nothing to
// ask for.
func backHeap() {}
