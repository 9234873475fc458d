module github.com/speckv/speckv/bindings/go

go 1.19
