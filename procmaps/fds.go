package procmaps

import (
	"bufio"
	"encoding/binary"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"stackshot/report"
)

// What a file descriptor is, from the text of its /proc/PID/fd/N link
// (the kernel's d_path or an anonymous inode's name) and, for a socket,
// the line of /proc/PID/net/{tcp,tcp6,udp,udp6,unix} with its inode.
//
// The network tables are the kernel's text, but a unix socket's path is
// whatever the process that bound it chose, newlines included: a path can
// forge a line. So a table is read only for the inodes asked for, an inode
// seen twice (in one table or two) is named by no line, and every line
// and every file is bounded.

// maxNetTable bounds how much of one /proc/PID/net table is read (a
// server with 100,000 connections has 15 MB of tcp lines; past the bound
// its sockets stay unnamed), maxNetLine one line of it.
const (
	maxNetTable = 32 << 20
	maxNetLine  = 8 << 10
)

// FDKind splits the text of an fd link into its kind and target: a
// socket's target is "socket:[ino]" until its table names it.
func FDKind(link string) (kind string, ino uint64) {
	anon := map[string]string{
		"[eventfd]": report.FDEventfd, "[eventpoll]": report.FDEpoll, "[timerfd]": report.FDTimerfd,
		"[signalfd]": report.FDSignalfd, "inotify": report.FDInotify, "[inotify]": report.FDInotify,
	}
	switch {
	case strings.HasPrefix(link, "socket:["):
		return report.FDSocket, bracketInode(link[len("socket:"):])
	case strings.HasPrefix(link, "pipe:["):
		return report.FDPipe, bracketInode(link[len("pipe:"):])
	case strings.HasPrefix(link, "anon_inode:"):
		if k, ok := anon[link[len("anon_inode:"):]]; ok {
			return k, 0
		}
		return report.FDAnon, 0
	case strings.HasPrefix(link, "/"):
		return report.FDFile, 0
	}
	return report.FDAnon, 0
}

// bracketInode reads "[123]".
func bracketInode(s string) uint64 {
	if len(s) < 3 || s[0] != '[' || s[len(s)-1] != ']' {
		return 0
	}
	n, err := strconv.ParseUint(s[1:len(s)-1], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// tcpStates are the kernel's TCP states (include/net/tcp_states.h).
var tcpStates = [...]string{1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
	6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING", 12: "NEW_SYN_RECV"}

// NetTable names the sockets of want (inode -> "" on entry) found in one
// /proc/PID/net table of protocol proto ("tcp", "tcp6", "udp", "udp6",
// "unix"): want[ino] becomes "tcp 127.0.0.1:40122 -> 127.0.0.1:5432",
// "tcp 127.0.0.1:6379 (listening)", "unix stream /run/x.sock". An inode
// seen twice, here or in a table read before, is marked ambiguous ("\x00")
// and named by neither; the caller treats that as unnamed. It reads at
// most maxNetTable bytes of r; a line past maxNetLine is skipped.
func NetTable(r io.Reader, proto string, want map[uint64]string) error {
	br := bufio.NewReaderSize(io.LimitReader(r, maxNetTable), 4096)
	first := true
	var fields [12]string
	for {
		line, err := readBoundedLine(br)
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if first { // the header
			first = false
			continue
		}
		if line == "" {
			continue
		}
		var ino uint64
		var name string
		if proto == "unix" {
			ino, name = unixLine(line, fields[:])
		} else {
			ino, name = inetLine(line, proto, fields[:])
		}
		if ino == 0 {
			continue
		}
		prev, asked := want[ino]
		switch {
		case !asked:
		case prev != "":
			want[ino] = ambiguous
		default:
			want[ino] = name
		}
	}
}

// ambiguous marks an inode that two lines claimed.
const ambiguous = "\x00"

// readBoundedLine returns the next line of br without its newline; a
// longer line than maxNetLine is skipped whole and returned as "".
func readBoundedLine(br *bufio.Reader) (string, error) {
	var sb []byte
	long := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			if len(sb)+len(chunk) > maxNetLine {
				long, sb = true, nil
			} else {
				sb = append(sb, chunk...)
			}
		}
		switch err {
		case nil:
			return strings.TrimSuffix(string(sb), "\n"), nil
		case bufio.ErrBufferFull:
			continue
		default:
			if len(sb) > 0 && err == io.EOF {
				return string(sb), nil
			}
			return "", err
		}
	}
}

// inetLine reads one line of a tcp/udp table: "sl local rem st tx:rx
// tr:when retrnsmt uid timeout inode ...".
func inetLine(line, proto string, f []string) (uint64, string) {
	f = fieldsInto(f, line)
	if len(f) < 10 {
		return 0, ""
	}
	ino, err := strconv.ParseUint(f[9], 10, 64)
	if err != nil || ino == 0 {
		return 0, ""
	}
	local, ok1 := inetAddr(f[1])
	remote, ok2 := inetAddr(f[2])
	st, err := strconv.ParseUint(f[3], 16, 8)
	if !ok1 || !ok2 || err != nil {
		return 0, ""
	}
	base := strings.TrimSuffix(proto, "6")
	switch {
	case base == "tcp" && st == 10:
		return ino, base + " " + local.String() + " (listening)"
	case remote.Port() == 0 && remote.Addr().IsUnspecified():
		return ino, base + " " + local.String()
	}
	s := base + " " + local.String() + " -> " + remote.String()
	if base == "tcp" && st != 1 && int(st) < len(tcpStates) && tcpStates[st] != "" {
		s += " (" + tcpStates[st] + ")"
	}
	return ino, s
}

// inetAddr reads "0100007F:1F90" (IPv4) or 32 hex digits and a port
// (IPv6): the address as the kernel holds it, printed as 32-bit words in
// the machine's own order (this machine's /proc: native order is right).
func inetAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || (len(h) != 8 && len(h) != 32) {
		return netip.AddrPort{}, false
	}
	var raw [16]byte
	for i := 0; i < len(h)/8; i++ {
		w, err := strconv.ParseUint(h[i*8:i*8+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, false
		}
		binary.NativeEndian.PutUint32(raw[i*4:], uint32(w))
	}
	var a netip.Addr
	if len(h) == 8 {
		a = netip.AddrFrom4([4]byte(raw[:4]))
	} else {
		a = netip.AddrFrom16(raw).Unmap()
	}
	return netip.AddrPortFrom(a, uint16(port)), true
}

// unixLine reads one line of the unix table: "Num RefCount Protocol Flags
// Type St Inode [Path]"; the path is the rest of the line (it may hold
// spaces).
func unixLine(line string, f []string) (uint64, string) {
	f = fieldsInto(f, line)
	if len(f) < 7 {
		return 0, ""
	}
	ino, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil || ino == 0 {
		return 0, ""
	}
	typ := map[string]string{"0001": "stream", "0002": "dgram", "0005": "seqpacket"}[f[4]]
	if typ == "" {
		typ = "type " + f[4]
	}
	name := "unix " + typ
	if len(f) > 7 {
		// The path: what follows the inode field, as the kernel wrote it.
		rest := line
		for i := 0; i < 7; i++ {
			rest = strings.TrimLeft(rest, " \t")
			j := strings.IndexAny(rest, " \t")
			if j < 0 {
				rest = ""
				break
			}
			rest = rest[j:]
		}
		if p := strings.TrimLeft(rest, " \t"); p != "" {
			name += " " + p
		}
	}
	return ino, name
}

// EpollTargets reads the descriptors an epoll instance watches from its
// /proc/PID/fdinfo/N text ("tfd: 5 events: 19 data: ..."): the first max
// of them in the kernel's order, and how many there are.
func EpollTargets(b []byte, max int) (fds []int, total int) {
	forLines(b, func(line string) bool {
		rest, ok := strings.CutPrefix(line, "tfd:")
		if !ok {
			return true
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return true
		}
		n, err := strconv.Atoi(f[0])
		if err != nil || n < 0 {
			return true
		}
		total++
		if len(fds) < max {
			fds = append(fds, n)
		}
		return true
	})
	return fds, total
}

// FDInode reads the "ino:" line of an fdinfo text (0: none; kernels
// before 5.14 do not write it).
func FDInode(b []byte) uint64 {
	var ino uint64
	forLines(b, func(line string) bool {
		if v, ok := strings.CutPrefix(line, "ino:"); ok {
			ino, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return false
		}
		return true
	})
	return ino
}
