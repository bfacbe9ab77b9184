module github.com/cairn-dev/cairn/bindings/go

go 1.24
