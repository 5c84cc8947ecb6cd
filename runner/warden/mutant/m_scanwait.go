//go:build sandproof_mutant && mutant_scanwait

package mutant

// Active is the mutation this build carries.
const Active = ScanWait
