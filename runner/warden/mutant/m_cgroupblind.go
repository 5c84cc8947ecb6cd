//go:build sandproof_mutant && mutant_cgroupblind

package mutant

// Active is the mutation this build carries.
const Active = CgroupBlind
