//go:build !unix

package comm

// fileLimit cannot be read here; the pool uses DefaultPoolLimit.
func fileLimit() int { return 0 }
