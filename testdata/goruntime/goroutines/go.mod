module goroutines

go 1.19
