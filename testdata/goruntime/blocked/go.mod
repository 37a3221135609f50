module blocked

go 1.21
