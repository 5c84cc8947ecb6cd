// Package witness is the independent observer's reading of /proc and of
// warden's outputs (receipts, the --detach line, the adversary fixture's
// record file), shared by the conformance suite, the soak and the probe.
//
// It imports nothing from runner/ (warden's own /proc reader, stop rules
// and receipt type live there): a bug in warden's parsing must not hide
// itself in the checks that judge warden. It imports no Ginkgo or Gomega
// either, so tools outside the suite can use it.
package witness
