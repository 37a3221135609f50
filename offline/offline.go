// Package offline reads saved captures (stackshot's capture files and ELF
// cores) into reports: both are hostile, so each file is read and resolved
// in a sandboxed child where one can run, else in-process. It is package live's
// counterpart for what was saved.
package offline

import (
	"path/filepath"

	"stackshot/capfile"
	"stackshot/diagnose"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// Options are what a Reader does, from the command's flags.
type Options struct {
	// Resolve: MaxFrames, Kernel (for the captures that hold kernel
	// frames) and Sysroot.
	Resolve resolve.Options
	Sandbox SandboxConfig // the children's configuration (Linux)
	// NoSandbox resolves in-process (a child's debuginfod fetches run in
	// the parent, through Sandbox.Symtab's fetchers).
	NoSandbox bool
	TIDs      []int // only these threads (all when none)
	Quiet     bool  // no warnings (errors are still said)
	Say       func(msg string)
}

// Reader resolves saved captures with one symbolizer.
type Reader struct {
	o   Options
	sym *symtab.Symbolizer
	// what a child's symbolizer could not do (Expired, BudgetExceeded)
	boxExpired, boxBudget bool
}

// New returns a Reader that symbolizes with sym.
func New(sym *symtab.Symbolizer, o Options) *Reader {
	if o.Say == nil {
		o.Say = func(string) {}
	}
	if a, err := filepath.Abs(o.Resolve.Exe); err == nil && o.Resolve.Exe != "" {
		o.Resolve.Exe = a // (as named on the command line: a child looks files up by absolute path)
	}
	return &Reader{o: o, sym: sym}
}

// Expired reports whether some frames were left unresolved at the
// deadline, in-process or in a child.
func (r *Reader) Expired() bool { return r.sym.Expired() || r.boxExpired }

// BudgetExceeded reports whether some module's symbols exceeded the
// budget, in-process or in a child.
func (r *Reader) BudgetExceeded() bool { return r.sym.BudgetExceeded() || r.boxBudget }

func (r *Reader) sayUnlessQuiet(msg string) {
	if !r.o.Quiet {
		r.o.Say(msg)
	}
}

// Read resolves the processes saved in the file at path, saying why one
// could not be (failed counts them). The error is for a file that cannot
// be read at all. The file (capture file or core: the target's bytes,
// hostile) is read and resolved whole in a sandboxed child unless the
// sandbox is off or no child starts; then in-process.
func (r *Reader) Read(path string) (procs []*report.Process, failed int, err error) {
	f, size, err := capfile.OpenFile(path)
	if err != nil {
		return nil, 0, err
	}
	if !r.o.NoSandbox {
		if procs, failed, err, ok := r.readSandboxed(f, size, path); ok {
			f.Close()
			noteGoroutines(procs)
			return procs, failed, err
		}
	}
	// The file stays open (a core's memory is read from it on demand)
	// until the command exits.
	saved, err := capfile.Load(f, size)
	if err != nil {
		f.Close()
		return nil, 0, capfile.LoadError(path, err)
	}
	for _, sv := range saved {
		ropts := r.o.Resolve
		ropts.Kernel = ropts.Kernel && sv.Kernel
		res := resolve.NewResolver(r.sym, ropts)
		p := sv.Process
		tasks := capfile.Tasks(p)
		if !p.Keep(r.o.TIDs, r.o.Say) {
			continue
		}
		if sv.Mem != nil && p.BuildIDs == nil {
			resolve.LinkMapModules(p, sv.Mem, r.sym, ropts.Sysroot, ropts.Exe) // a core that names no files
			resolve.CollectImages(p, sv.Mem)                                   // a core of another tool
		}
		rp, err := res.SafeProcess(p, sv.Mem)
		if err != nil {
			r.o.Say(err.Error())
			failed++
			continue
		}
		rp.Warnings = append(rp.Warnings, sv.Warnings...)
		if sv.Mem != nil {
			diagnose.Saved(rp, sv.Mem, tasks, res.Space(p, sv.Mem).DataName)
		}
		procs = append(procs, rp)
	}
	noteGoroutines(procs)
	return procs, failed, nil
}

// noteGoroutines says, for each Go program among procs, that its
// goroutines were not read: they are read from a live program's runtime,
// and a saved file is not searched for them. A Go program is known by
// its threads' frames (the runtime's thread start or goroutine exit).
func noteGoroutines(procs []*report.Process) {
	for _, p := range procs {
		if p.Runtime != nil || !goFrames(p) {
			continue
		}
		p.Runtime = &report.Runtime{Name: "go"}
		p.Warnings = append(p.Warnings, "goroutines not read: they are read from a live Go program only, not from a saved capture or core")
	}
}

func goFrames(p *report.Process) bool {
	for i := range p.Threads {
		for _, f := range p.Threads[i].Frames {
			switch f.Function {
			case "runtime.mstart", "runtime.goexit", "runtime.rt0_go":
				return true
			}
		}
	}
	return false
}
