//go:build !linux

package main

// reserveHeap, backHeap and settleHeap are Linux's transparent huge pages;
// elsewhere there is nothing to ask for.
func reserveHeap() {}

func backHeap(advise bool) {}

func settleHeap() {}
