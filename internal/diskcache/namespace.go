//go:build linux

package diskcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A namespace is a subdirectory of the cache, "ns-NAME", holding entries
// of its own: a lookup in one never finds an entry of another, nor of the
// main namespace (the cache directory itself, whose lookups never look
// into a subdirectory: an entry's name is a hash). Sandboxed parsers get
// one each, named by their parent after what the parsed bytes came from
// (a target's owner, a capture file), so that an entry a compromised
// parser wrote can only mislead later parses of bytes the same party
// controls. The main namespace's eviction and size bound cover every
// namespace.
const nsPrefix = "ns-"

const maxNamespace = 64

// ValidNamespace reports whether name may name a namespace: 1 to 64 of
// [a-z0-9_.-], not starting with a dot.
func ValidNamespace(name string) bool {
	if name == "" || len(name) > maxNamespace || name[0] == '.' {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// Namespace opens (creating it, mode 0700) the namespace name of the main
// namespace c. Like the cache directory, it must be a real directory
// owned by stackshot's effective user and writable by no one else. A nil
// c has no namespaces (nil, nil).
func (c *Cache) Namespace(name string) (*Cache, error) {
	if c == nil {
		return nil, nil
	}
	if c.root != nil {
		return nil, errors.New("a namespace has no namespaces")
	}
	if !ValidNamespace(name) {
		return nil, fmt.Errorf("invalid cache namespace %q", name)
	}
	dfd := int(c.dir.Fd())
	sub := nsPrefix + name
	if err := unix.Mkdirat(dfd, sub, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("cache namespace %s: %v", sub, err)
	}
	fd, err := unix.Openat(dfd, sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cache namespace %s: %v", sub, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("cache namespace %s is not stackshot's own (remove it)", sub)
	}
	return &Cache{dir: os.NewFile(uintptr(fd), filepath.Join(c.Dir(), sub)), maxBytes: c.maxBytes, root: c}, nil
}

// NamespaceDir is the directory of namespace name within the cache dir.
func NamespaceDir(dir, name string) string { return filepath.Join(dir, nsPrefix+name) }
