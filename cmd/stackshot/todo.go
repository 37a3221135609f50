//go:build linux

package main

func cmdRecord(args []string) error { return usageError{"record is not available yet"} }
