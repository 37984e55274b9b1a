// Package base holds what every layer of the kv store shares: internal keys
// (a user key plus a sequence number and a kind), their ordering, the
// corruption error that names a file and an offset, and file naming.
//
// # Internal keys
//
// Every entry the store keeps is addressed by an internal key: the user key
// followed by an 8-byte little-endian trailer, trailer = seq<<8 | kind.
// Internal keys order by user key ascending (bytewise), then by trailer
// descending, so the newest version of a user key comes first. A sequence
// number has 56 bits; SeqNumMax is reserved for seek keys and for the
// exclusive-end sentinel of range tombstones.
package base
