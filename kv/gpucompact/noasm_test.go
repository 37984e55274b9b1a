//go:build noasm

package gpucompact

const noasm = true
