// Package sorteddict holds what the sorted dictionaries (packages sortedarray
// and lsm) share: their front over internal/front, the Go-slice staging of
// their operations (Host), and the transfers of range-query results; the
// GPU runtime they use (scratch, pinned staging) is internal/gpurt's.
package sorteddict
