//go:build linux

package sandbox

import (
	"os"

	"golang.org/x/sys/unix"

	"stackshot/procmaps"
	"stackshot/ptrace"
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
const kGive = "give" // down: a mapped file (Path, as the child would ask for it) with its descriptor; no answer

// maxGiven bounds the files given with one capture's checks, and those
// the child keeps.
const maxGiven = 8

// giveModules hands the child the mapped files the check of ths in p
// will ask for first, unless given with an earlier batch of the capture
// (c.gave, reset when its images are asked).
func (c *Child) giveModules(p *ptrace.Process, ths []*ptrace.Thread) error {
	if !c.cfg.Resolve.Live || c.t.PID == 0 || p.PID != c.t.PID || p.MemTID != 0 {
		return nil // (no map_files: an exited main thread took them along)
	}
	maps := procmaps.Maps(p.Maps)
	var picked []*procmaps.Mapping
	pick := func(m *procmaps.Mapping) {
		if len(picked)+len(c.gave) < maxGiven && m.Executable() && m.Kind == procmaps.KindFile {
			for _, o := range picked {
				if o == m {
					return
				}
			}
			if !c.gave[procmaps.MapFilesPath(p.PID, m)] {
				picked = append(picked, m)
			}
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
	for _, m := range picked {
		path := procmaps.MapFilesPath(p.PID, m)
		if c.gave == nil {
			c.gave = map[string]bool{}
		}
		c.gave[path] = true
		f, err := c.open(&upMsg{Kind: kOpen, Path: path, Follow: true})
		if err != nil {
			continue // (the child asks, and is told why)
		}
		err = c.sendFD(&downMsg{Kind: kGive, Path: path}, int(f.Fd()))
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// keepGiven keeps, in the child, a file the parent gave (closed when
// maxGiven are kept already).
func (c *client) keepGiven(path string, fd int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.given == nil {
		c.given = map[string]int{}
	}
	if old, ok := c.given[path]; ok {
		unix.Close(old)
	} else if len(c.given) >= maxGiven {
		unix.Close(fd)
		return
	}
	c.given[path] = fd
}

// takeGiven returns, once, the file the parent gave for path.
func (c *client) takeGiven(path string) (*os.File, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fd, ok := c.given[path]
	if !ok {
		return nil, false
	}
	delete(c.given, path)
	return os.NewFile(uintptr(fd), path), true
}
