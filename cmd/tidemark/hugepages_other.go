//go:build !linux

package main

// backHeap and settleHeap are Linux's transparent huge pages; elsewhere
// there is nothing to ask for.
func backHeap() {}

func settleHeap() {}
