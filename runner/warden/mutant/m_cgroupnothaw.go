//go:build sandproof_mutant && mutant_cgroupnothaw

package mutant

// Active is the mutation this build carries.
const Active = CgroupNoThaw
