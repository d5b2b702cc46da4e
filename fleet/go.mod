module github.com/outbound-go/outbound/fleet

go 1.26.0

toolchain go1.26.10

require (
	github.com/outbound-go/outbound v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/outbound-go/outbound => ../
