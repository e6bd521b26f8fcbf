module github.com/lockrun/lockrun

go 1.26.8

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/urfave/cli/v2 v2.27.7
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
)
