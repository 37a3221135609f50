//go:build linux

package main

func cmdRecord(args []string) error    { return usageError{"record is not available yet"} }
func cmdCapture(args []string) error   { return usageError{"capture is not available yet"} }
func cmdReport(args []string) error    { return usageError{"report is not available yet"} }
func cmdSymbolize(args []string) error { return usageError{"symbolize is not available yet"} }
