module github.com/warpkit/warpkit

go 1.26

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
)
