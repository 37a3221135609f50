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
	// A Java thread's waits, read from its JVM (the owner is the JVM's
	// record): a monitor it blocks entering (synchronized), the object it
	// waits on in Object.wait (no owner: it waits to be notified), a
	// java.util.concurrent lock it is parked on (its exclusive owner).
	WaitMonitor    = "monitor"
	WaitObjectWait = "object-wait"
	WaitJUCLock    = "juc-lock"
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
	Names  []string // distinct names, runs sharing a stem folded to "stem*"
	Frames []Frame  // the first member's frames
	// Members indexes the threads (in the slice given to GroupThreads).
	Members []int
}

// Progress of a thread across snapshots (Thread.Progress).
const (
	ProgressStuck    = "stuck"    // same user stack every time, no CPU time used
	ProgressSpinning = "spinning" // CPU time used, same innermost function every time
	ProgressMoving   = "moving"
)

// ProgressSummary counts threads by progress over Snapshots snapshots.
type ProgressSummary struct {
	Snapshots               int
	IntervalS               float64
	Stuck, Spinning, Moving int
}
