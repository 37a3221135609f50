package arch

//go:generate go run gen_syscalls.go
