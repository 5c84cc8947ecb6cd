//go:build sandproof_mutant && mutant_cgrouponly

package mutant

// Active is the mutation this build carries.
const Active = CgroupOnly
