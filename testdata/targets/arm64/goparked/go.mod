module goparked

go 1.19
