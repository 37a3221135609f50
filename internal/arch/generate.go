package arch

//go:generate go run gen_syscalls.go
//go:generate go run gen_syscalls.go -arch aarch64 -header /usr/aarch64-linux-gnu/include/asm-generic/unistd.h -o syscalls_arm64_arch.go
