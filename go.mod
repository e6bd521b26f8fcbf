module github.com/lockrun/lockrun

go 1.26.8

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/urfave/cli/v2 v2.27.7
	golang.org/x/sys v0.38.0
)

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	golang.org/x/text v0.41.0 // indirect
)
