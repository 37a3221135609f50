// Package resolve drives the pipeline's middle: it takes a raw capture
// (ptrace.Process), unwinds each thread (unwind) and names each frame
// (symtab), producing the report's plain data (package report) for the
// output formats and the diagnoses.
//
// It works on a live capture (with the target's memory and its /proc view of
// files) and on a saved one (host files only).
package resolve
