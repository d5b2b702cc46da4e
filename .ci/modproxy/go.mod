module modproxy

go 1.26.0

toolchain go1.26.10

require golang.org/x/mod v0.43.0
