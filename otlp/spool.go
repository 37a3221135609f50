//go:build linux

package otlp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/safefile"
)

// Spool keeps the profiles a collector did not take, one file each
// (the gzipped request body, as it goes on the wire), until a later run
// sends them.
//
// A profile is written under a unique name (time, pid, random) through
// safefile: a hidden temporary file created O_EXCL, mode 0600, renamed into
// place whole, so a reader never sees half a profile. A sender claims a
// file by renaming it to a name of its own before reading it; rename is
// atomic, so of two runs flushing at once exactly one gets each file, and
// the file is removed only once the collector took it (or said it was
// bad). A claim left by a run that died is given back after ten minutes.
// The spool is bounded in files and bytes: when a new profile would pass
// either bound, the oldest go first, each with a warning.
//
// The directory is opened once (safefile.OpenDir: no symbolic link
// followed, its owner and mode checked, its parents as an output file's
// are); listing, writing, claiming, reading and removing then go through
// that descriptor, never the path: a spool swapped for a link, or for
// another user's directory, while a run goes on is not followed.
type Spool struct {
	Dir      string // as given, for messages
	MaxFiles int
	MaxBytes int64
	Warn     func(string)
	dir      *os.File
}

const (
	spoolExt          = ".otlp.gz"
	claimMark         = ".sending-"
	tmpPrefix         = "." // safefile's temporary files are hidden
	defaultStaleClaim = 10 * time.Minute
)

// staleClaim is how long a claim may go untouched before it is taken
// for the claim of a run that died.
var staleClaim = defaultStaleClaim

// Default bounds of a spool.
const (
	DefaultSpoolFiles = 100
	DefaultSpoolBytes = 64 << 20
)

// OpenSpool opens dir (creating it, mode 0700, when it does not exist):
// it must be a real directory, not a symbolic link, belong to stackshot's
// effective user and be writable by no one else (a profile planted there
// would be sent as ours), and a file must be creatable in it.
func OpenSpool(dir string, maxFiles int, maxBytes int64, warn func(string)) (*Spool, error) {
	if dir == "" {
		return nil, errors.New("--spool needs a directory")
	}
	if maxFiles <= 0 || maxBytes <= 0 {
		return nil, errors.New("the spool's bounds must be positive")
	}
	d, err := safefile.OpenDir(dir, "the spool directory")
	if err != nil {
		return nil, err
	}
	probe, err := safefile.CreateAt(d, "probe"+spoolExt, safefile.Private)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("the spool directory %s is not writable (%v)", dir, err)
	}
	probe.Abort()
	return &Spool{Dir: dir, MaxFiles: maxFiles, MaxBytes: maxBytes, Warn: warn, dir: d}, nil
}

// Close releases the spool's directory.
func (s *Spool) Close() error { return s.dir.Close() }

// fd is the spool directory's descriptor.
func (s *Spool) fd() int { return int(s.dir.Fd()) }

func (s *Spool) warn(format string, args ...any) {
	if s.Warn != nil {
		s.Warn(fmt.Sprintf(format, args...))
	}
}

// Put keeps body and returns the file it is in; then the oldest profiles
// are dropped while the spool is over its bounds.
func (s *Spool) Put(body []byte) (string, error) {
	if int64(len(body)) > s.MaxBytes {
		return "", fmt.Errorf("the profile (%d bytes) is larger than the spool's bound of %d bytes", len(body), s.MaxBytes)
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("%020d-%d-%s%s", time.Now().UnixNano(), os.Getpid(), hex.EncodeToString(rnd[:]), spoolExt)
	f, err := safefile.CreateAt(s.dir, name, safefile.Private)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(body); err != nil {
		f.Abort()
		return "", fmt.Errorf("writing %s (%v; check the free space)", name, err)
	}
	if err := f.Commit(); err != nil {
		return "", err
	}
	s.trim(name)
	return filepath.Join(s.Dir, name), nil
}

type spooled struct {
	name string
	size int64
}

// list returns the spooled profiles, oldest first (their names start with
// the time they were written).
func (s *Spool) list() ([]spooled, error) {
	names, err := s.names()
	if err != nil {
		return nil, err
	}
	var out []spooled
	for _, n := range names {
		if strings.HasPrefix(n, tmpPrefix) || !strings.HasSuffix(n, spoolExt) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(s.fd(), n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue // taken meanwhile, or no profile
		}
		out = append(out, spooled{n, st.Size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// names lists the spool directory through its descriptor (getdents on a
// duplicate, read from its start each time).
func (s *Spool) names() ([]string, error) {
	fd, err := unix.Openat(s.fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read the spool directory %s (%v)", s.Dir, err)
	}
	d := os.NewFile(uintptr(fd), s.Dir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("cannot read the spool directory %s (%v)", s.Dir, err)
	}
	return names, nil
}

// trim drops the oldest profiles (never keep, the one just written) while
// the spool holds more than MaxFiles files or MaxBytes bytes.
func (s *Spool) trim(keep string) {
	files, err := s.list()
	if err != nil {
		return
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	n := len(files)
	for _, f := range files {
		if n <= s.MaxFiles && total <= s.MaxBytes {
			break
		}
		if f.name == keep {
			continue
		}
		// Claimed first, so two runs trimming at once drop (and warn
		// about) each file once; one another run claimed is leaving
		// anyway.
		if claim, ok := s.claim(f.name); ok {
			s.remove(claim)
			s.warn("the spool %s is full (%d files, %d bytes; bounds %d and %d): dropped its oldest profile %s",
				s.Dir, n, total, s.MaxFiles, s.MaxBytes, f.name)
		}
		n--
		total -= f.size
	}
}

// claim renames a spooled file to a name of this run's; false when
// another run took it first.
func (s *Spool) claim(name string) (string, bool) {
	var rnd [8]byte
	rand.Read(rnd[:])
	claim := name + claimMark + fmt.Sprint(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	if err := unix.Renameat(s.fd(), name, s.fd(), claim); err != nil {
		return "", false
	}
	return claim, true
}

// unclaim gives a claimed file back to the spool under its first name.
func (s *Spool) unclaim(claim string) {
	name, _, _ := strings.Cut(claim, claimMark)
	unix.Renameat(s.fd(), claim, s.fd(), name)
}

// remove removes the spool's file name.
func (s *Spool) remove(name string) { unix.Unlinkat(s.fd(), name, 0) }

// recoverClaims gives back the claims of runs that died while sending
// (untouched for staleClaim: renaming a file sets its change time).
func (s *Spool) recoverClaims() {
	names, err := s.names()
	if err != nil {
		return
	}
	for _, n := range names {
		if !strings.Contains(n, spoolExt+claimMark) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(s.fd(), n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if time.Since(time.Unix(st.Ctim.Unix())) > staleClaim {
			s.unclaim(n)
		}
	}
}

// Pending is the number of profiles waiting in the spool.
func (s *Spool) Pending() int {
	files, _ := s.list()
	return len(files)
}

// Flush sends the spooled profiles, oldest first, one attempt each, and
// stops at the first that the collector does not take for a reason that
// may pass (it stays spooled). A profile the collector rejects as bad is
// dropped with a warning. It returns how many were delivered.
func (s *Spool) Flush(ctx context.Context, send func(context.Context, []byte) error) (int, error) {
	s.recoverClaims()
	files, err := s.list()
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, f := range files {
		if ctx.Err() != nil {
			return sent, ctx.Err()
		}
		claim, ok := s.claim(f.name)
		if !ok {
			continue // another run is sending it
		}
		body, err := s.read(claim)
		if err != nil {
			s.remove(claim)
			s.warn("dropped the spooled profile %s (%v)", f.name, err)
			continue
		}
		err = send(ctx, body)
		var e *Error
		switch {
		case err == nil:
			s.remove(claim)
			sent++
		case errors.As(err, &e) && e.Kind == Rejected:
			s.remove(claim)
			s.warn("dropped the spooled profile %s: %v", f.name, err)
		default:
			s.unclaim(claim)
			return sent, err
		}
	}
	return sent, nil
}

// read reads the claimed file name: a regular file of ours, within the
// bound.
func (s *Spool) read(name string) ([]byte, error) {
	fd, err := unix.Openat(s.fd(), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, errors.New("not a regular file")
	case int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("it belongs to uid %d", st.Uid)
	case st.Size > s.MaxBytes:
		return nil, fmt.Errorf("%d bytes, over the spool's bound", st.Size)
	}
	b, err := io.ReadAll(io.LimitReader(f, s.MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return nil, errors.New("not a gzipped OTLP request")
	}
	return b, nil
}
