package report

// Kinds of things a thread waits for (WaitingFor.Kind). The first three
// name their owner when the lock itself records it; the others never do.
const (
	WaitMutex     = "mutex"     // glibc pthread_mutex_t (std::mutex)
	WaitPIMutex   = "pi-mutex"  // a priority-inheritance futex (owner in the word)
	WaitRWLock    = "rwlock"    // glibc pthread_rwlock_t (std::shared_mutex)
	WaitCondvar   = "condvar"   // pthread_cond_t (std::condition_variable)
	WaitSemaphore = "semaphore" // sem_t
	WaitRustMutex = "rust-mutex"
	// A CPython threading lock: a Lock (no owner recorded) or an RLock.
	WaitPythonLock  = "python-lock"
	WaitPythonRLock = "python-rlock"
	WaitJoin        = "join"       // pthread_join: the owner is the joined thread (Address its pthread_t)
	WaitStdio       = "stdio-lock" // a glibc FILE's _IO_lock_t (Symbol: stdout, stderr, a FILE's symbol)
	// A Java thread's waits, read from its JVM (the owner is the JVM's
	// record): a monitor it blocks entering (synchronized), the object it
	// waits on in Object.wait (no owner: it waits to be notified), a
	// java.util.concurrent lock it is parked on (its exclusive owner).
	WaitMonitor    = "monitor"
	WaitObjectWait = "object-wait"
	WaitJUCLock    = "juc-lock"
	// CPython's GIL: the owner is the thread that holds it.
	WaitPythonGIL = "python-gil"
)

// RuntimeWait reports whether a wait of kind was read from a runtime
// (a JVM) rather than from the native lock a thread blocks in.
func RuntimeWait(kind string) bool {
	return kind == WaitMonitor || kind == WaitObjectWait || kind == WaitJUCLock
}

// WaitingFor says what a blocked thread waits for and, when the lock
// records it and every check passed, which thread holds it.
type WaitingFor struct {
	Kind     string
	Address  uint64 // the lock's address; 0 when it could not be found
	OwnerTID *int   // nil: unknown (or not a lock with an owner)
	// OwnerName is the owner's thread name as the report has it.
	OwnerName string
	// Class is the class of a Java wait's object ("java.lang.Object").
	Class string
	// Note says why the owner is unknown, or what else was seen ("the
	// kernel reported a PI deadlock"); "" when there is nothing to add.
	Note string
	// OwnerState is what the owner is doing; nil unknown.
	OwnerState *OwnerState
	// Symbol names the lock when it is a global or static ("pool_lock",
	// "accounts+0x40"), or the FILE of a stdio lock ("stdout").
	Symbol string
	// ForeignTID is the owner a process-shared lock records when it is
	// no thread of this process; OwnerPID and OwnerComm are the process
	// that thread belongs to, when proved (0 and "" otherwise).
	ForeignTID int
	OwnerPID   int
	OwnerComm  string
}

// Deadlock is one cycle of the wait-for graph: TIDs[i] waits for the lock
// at Addresses[i], held by TIDs[(i+1)%n].
type Deadlock struct {
	TIDs      []int
	Addresses []uint64
}

// Group is threads whose function sequences are equal.
type Group struct {
	Count  int
	TIDs   []int
	Names  []string // distinct names (Thread.ShownName), runs sharing a stem folded to "stem*"
	Frames []Frame  // the first member's frames
	// Members indexes the threads (in the slice given to GroupThreads).
	Members []int
}

// Progress of a thread across snapshots (Thread.Progress).
const (
	ProgressStuck    = "stuck"    // same user stack every time, no CPU time used
	ProgressSpinning = "spinning" // CPU time used, same innermost function every time
	ProgressMoving   = "moving"
	// ProgressWaiting: the same wait (system call, lock) in every
	// snapshot, little CPU: a timed wait or an event loop at rest.
	ProgressWaiting = "waiting"
)

// ProgressSummary counts threads by progress over Snapshots snapshots.
type ProgressSummary struct {
	Snapshots               int
	IntervalS               float64
	Stuck, Spinning, Moving int
	Waiting                 int
}

// Kinds of file descriptor (FD.Kind).
const (
	FDFile     = "file"
	FDPipe     = "pipe"
	FDSocket   = "socket"
	FDEventfd  = "eventfd"
	FDEpoll    = "epoll"
	FDTimerfd  = "timerfd"
	FDSignalfd = "signalfd"
	FDInotify  = "inotify"
	FDAnon     = "anon"
)

// FD is a file descriptor a blocked thread waits on, as the target's
// /proc shows it: Target is a path, "pipe:[ino]", or for a socket its
// protocol and both ends ("tcp 10.0.0.4:40122 -> 10.0.0.9:5432"). Every
// string is the target's (escape it before a terminal sees it).
type FD struct {
	Num    int
	Kind   string
	Target string
}

// FDWait is what a thread blocked in a system call on descriptors waits
// on: FD the one its call is on (an epoll_wait's epoll instance, a read's
// descriptor); Watched the descriptors a poll, select or epoll watches,
// at most MaxWatched named, of WatchedCount (-1: not known).
type FDWait struct {
	FD           *FD
	Watched      []FD
	WatchedCount int
}

// MaxWatched is how many watched descriptors a report names.
const MaxWatched = 8

// OwnerState is what the owner of a lock a thread waits for is itself
// doing, as the same report shows it: blocked in a system call (Syscall,
// with its descriptor when one is named), waiting for a lock (Waiting),
// or running (State "R").
type OwnerState struct {
	State   string
	Syscall string
	FD      *FD
	Waiting *WaitingFor // kind, address and owner only
	// PythonAt is where the owner runs Python ("app.py:88"); "" unknown.
	PythonAt string
}
