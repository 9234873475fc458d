// Go binding of speckv, a KV-cache pool for LLM serving engines. Licence Apache-2.0
// (the repository's LICENSE). How it finds libspeckv.so.0: README.md.
module github.com/speckv/speckv/bindings/go

go 1.19
