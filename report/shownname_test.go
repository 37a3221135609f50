package report

import "testing"

// ShownName: the Python name where the system's is the process's
// default; the system's where the program set one.
func TestShownName(t *testing.T) {
	for _, c := range []struct{ name, py, want string }{
		{"python3", "worker-1", "worker-1"},
		{"", "worker-1", "worker-1"},
		{"pool", "worker-1", "pool"},
		{"python3", "", "python3"},
	} {
		th := Thread{Name: c.name, PythonName: c.py}
		if got := th.ShownName("python3"); got != c.want {
			t.Errorf("%q, %q: %q, want %q", c.name, c.py, got, c.want)
		}
	}
}
