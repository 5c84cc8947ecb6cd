package conformance_test

import "unsafe"

// ptr turns a byte in a read buffer into a pointer for decoding kernel
// records (inotify events).
func ptr(b *byte) unsafe.Pointer { return unsafe.Pointer(b) }
