//go:build linux

package sandbox

import (
	"errors"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/symtab"
)

// With a capture's checks, the parent hands the child the files the
// checks are about to ask for: the mapped files of the modules its threads
// are in, and of the main executable (where most stacks' callers are).
// Each would be a round trip in the middle of the check: two for a dump of
// a C program, about 0.4 ms of a 1-thread dump's 8; and a check the
// capture sends while it observes other threads would wait for the answer
// until the capture reads its answers. Each is opened as the child's own
// kOpen of it would be (Child.open): the child gets nothing it could not
// ask for.
//
// Once the capture has read the modules' build ids (the first batch of
// checks asks for them), the parent hands over for the same modules what
// naming their frames asks for next (giveDebug): the first place their
// separate debug file is looked for (or that it is not there), and the
// cache entries of their symbol tables and DWARF, then kGiven. A dump of
// a C program made four calls for them, about 1 ms of a 1-thread dump.
const (
	kGive      = "give"      // down: a file (Path, as the child would ask for it, on the host, following symlinks) with its descriptor, or Err: why it cannot be opened; no answer
	kGiveCache = "givecache" // down: the cache entry of Key, with its descriptor; no answer
	kGiven     = "given"     // down: giveDebug's files and entries are all sent; no answer
)

// maxGiven bounds the files given with one capture's checks, and the
// modules whose debug files and cache entries go with its resolve.
const maxGiven = 8

// pickModules picks, for ths in p, the mappings of the modules given
// (at most max, none that skip, when set, refuses): those the threads'
// PCs are in, then the executable's.
func pickModules(p *ptrace.Process, ths []*ptrace.Thread, max int, skip func(*procmaps.Mapping) bool) []*procmaps.Mapping {
	maps := procmaps.Maps(p.Maps)
	var picked []*procmaps.Mapping
	pick := func(m *procmaps.Mapping) {
		if len(picked) < max && m.Executable() && m.Kind == procmaps.KindFile && !slices.Contains(picked, m) && (skip == nil || !skip(m)) {
			picked = append(picked, m)
		}
	}
	for _, th := range ths {
		if pc := th.PC(); pc != 0 {
			if m, ok := maps.Find(pc); ok {
				pick(m)
			}
		}
	}
	for i := range maps {
		if maps[i].Path == p.Exe {
			pick(&maps[i])
		}
	}
	return picked
}

// givesTo reports whether files of p may be given: the target's own
// live process, with its map_files (an exited main thread took them
// along).
func (c *Child) givesTo(p *ptrace.Process) bool {
	return c.cfg.Resolve.Live && c.t.PID != 0 && p.PID == c.t.PID && p.MemTID == 0
}

// giveModules hands the child the mapped files the check of ths in p
// will ask for first, unless given with an earlier batch of the capture
// (c.gave, reset when its images are asked).
func (c *Child) giveModules(p *ptrace.Process, ths []*ptrace.Thread) error {
	if !c.givesTo(p) {
		return nil
	}
	picked := pickModules(p, ths, maxGiven-len(c.gave), func(m *procmaps.Mapping) bool {
		return c.gave[procmaps.MapFilesPath(p.PID, m)]
	})
	for _, m := range picked {
		if c.gave == nil {
			c.gave = map[string]bool{}
		}
		c.gave[procmaps.MapFilesPath(p.PID, m)] = true
		f, mod, ok := c.openModule(p, m)
		if f == nil {
			continue // (the child asks, and is told why)
		}
		if ok {
			c.gaveMods = append(c.gaveMods, mod)
		}
		err := c.sendFD(&downMsg{Kind: kGive, Path: mod.path}, int(f.Fd()))
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// openModule opens m's file (its map_files, as the child's kOpen of it
// would be: nil when it cannot be) and tells its identity (ok: read).
func (c *Child) openModule(p *ptrace.Process, m *procmaps.Mapping) (f *os.File, mod givenModule, ok bool) {
	mod.path = procmaps.MapFilesPath(p.PID, m)
	mod.first = procmaps.Maps(p.Maps).FirstOfFile(m).Start
	f, err := c.open(&upMsg{Kind: kOpen, Path: mod.path, Follow: true})
	if err != nil {
		return nil, mod, false
	}
	mod.id, err = symtab.FileIDOf(f, "")
	return f, mod, err == nil
}

// givenModule is a module whose file went with a capture's checks: its
// map_files path, the start of its file's first mapping, and its identity.
type givenModule struct {
	path  string
	first uint64
	id    symtab.FileID
}

// giveDebug hands the child, as soon as the capture's build ids are read
// (or else before p's resolve), for the modules mods (modulesGiven), what
// naming their frames asks for first: the file at the first place their
// debug file is looked for (symtab.BuildIDDebugPath), or why there is
// none, and the cache entries of their symbol tables and DWARF
// (symtab.NamingKeys, keyed as if that file is the debug file, or none
// is). Each is opened as the child's own request would be; the child
// uses one only for exactly the request it answers, so an entry keyed
// otherwise than it asks (another debug file was found, the build id in
// the file is not the one in memory, a dwz file) is simply not used.
// Once per child.
func (c *Child) giveDebug(p *ptrace.Process, mods []givenModule) error {
	if c.gaveDebug || !c.givesTo(p) || len(p.BuildIDs) == 0 || c.imagesOwed == p || len(mods) == 0 {
		return nil
	}
	c.gaveDebug = true
	// Everything is opened first, then sent in a row: the child, asleep
	// until the first arrives, finds the others waiting.
	type gift struct {
		m *downMsg
		f *os.File
	}
	var gifts []gift
	defer func() {
		for _, g := range gifts {
			if g.f != nil {
				g.f.Close()
			}
		}
	}()
	for _, mod := range mods {
		id := p.BuildIDs[mod.first]
		cand, ok := symtab.BuildIDDebugPath(id)
		if !ok {
			continue
		}
		file := mod.id
		file.BuildID = id
		var debug *symtab.FileID
		f, err := c.open(&upMsg{Kind: kOpen, Path: cand, Follow: true})
		if err != nil {
			gifts = append(gifts, gift{&downMsg{Kind: kGive, Path: cand, Err: err.Error()}, nil})
		} else {
			if d, err := symtab.FileIDOf(f, id); err == nil {
				debug = &d
			}
			gifts = append(gifts, gift{&downMsg{Kind: kGive, Path: cand}, f})
		}
		for _, key := range symtab.NamingKeys(file, debug, c.cfg.Symtab.NamesOnly) {
			if c.nsCache == nil || checkKey(&key) != nil {
				continue
			}
			if f, err := c.nsCache.OpenEntry(key, c.nsCache.MaxPayload()); err == nil {
				gifts = append(gifts, gift{&downMsg{Kind: kGiveCache, Key: &key}, f})
				c.entriesGiven++
			} // (none: the child asks, and is told)
		}
	}
	// Then the child, once no request waits, readies the modules its
	// checks' walks are in (resolve.Resolver.WarmChecked), while the
	// capture ends here and the resolve is asked: with the files given,
	// it has no call to make for them. Not before: it would ask for them.
	gifts = append(gifts, gift{&downMsg{Kind: kGiven}, nil})
	for _, g := range gifts {
		fd := -1
		if g.f != nil {
			fd = int(g.f.Fd())
		}
		if err := c.sendFD(g.m, fd); err != nil {
			return err
		}
	}
	return nil
}

// modulesGiven are the modules whose files went with p's checks, else
// (no batched checks) those of p's threads' PCs and its executable: read
// from p, so only once its capture is done.
func (c *Child) modulesGiven(p *ptrace.Process) []givenModule {
	if len(c.gaveMods) > 0 {
		return c.gaveMods
	}
	ths := make([]*ptrace.Thread, len(p.Threads))
	for i := range p.Threads {
		ths[i] = &p.Threads[i]
	}
	var mods []givenModule
	for _, m := range pickModules(p, ths, maxGiven, nil) {
		if f, mod, ok := c.openModule(p, m); f != nil {
			f.Close()
			if ok {
				mods = append(mods, mod)
			}
		}
	}
	return mods
}

// idle reports whether no request of the parent waits: none was kept
// while a call waited, and none is in the socket.
func (c *client) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.early) > 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(c.sock), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

// keepGift keeps what a kGive or kGiveCache hands over, with its
// descriptor fd (-1: none), within maxKept and maxKeptEntries; a
// descriptor not kept is closed.
func (c *client) keepGift(m *downMsg, fd int) {
	switch {
	case m.Kind == kGive && (fd >= 0 || m.Err != ""):
		c.keepGiven(m.Path, fd, m.Err)
	case m.Kind == kGiveCache && fd >= 0 && m.Key != nil && childCache != nil && childCache.keepGiven(*m.Key, fd):
	case fd >= 0:
		unix.Close(fd)
	}
}

// maxKept bounds the files the child keeps given: a capture's module
// files and, with its resolve, their debug files; maxKeptEntries the
// cache entries (symtab.NamingKeys: up to three a module).
const (
	maxKept        = 2 * maxGiven
	maxKeptEntries = 3 * maxGiven
)

// given is a file the parent gave (fd), or why it could not open it.
type given struct {
	fd  int
	err string
}

// keepGiven keeps, in the child, a file the parent gave, or (fd < 0) why
// it could not open it; none when maxKept are kept already (fd is closed).
func (c *client) keepGiven(path string, fd int, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.given == nil {
		c.given = map[string]given{}
	}
	if old, ok := c.given[path]; ok {
		if old.fd >= 0 {
			unix.Close(old.fd)
		}
	} else if len(c.given) >= maxKept {
		if fd >= 0 {
			unix.Close(fd)
		}
		return
	}
	c.given[path] = given{fd, why}
}

// takeGiven returns, once, the file the parent gave for path, or the
// error it had opening it; ok is false when it gave neither.
func (c *client) takeGiven(path string) (f *os.File, err error, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.given[path]
	if !ok {
		return nil, nil, false
	}
	delete(c.given, path)
	if g.fd < 0 {
		return nil, errors.New(g.err), true
	}
	return os.NewFile(uintptr(g.fd), path), nil, true
}
