module github.com/arbor-engine/arbor/bindings/go

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	golang.org/x/crypto v0.58.0
)

require golang.org/x/sys v0.49.0 // indirect
