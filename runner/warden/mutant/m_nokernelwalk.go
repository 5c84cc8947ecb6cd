//go:build sandproof_mutant && mutant_nokernelwalk

package mutant

// Active is the mutation this build carries.
const Active = NoKernelWalk
