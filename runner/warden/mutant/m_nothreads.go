//go:build sandproof_mutant && mutant_nothreads

package mutant

// Active is the mutation this build carries.
const Active = NoThreads
