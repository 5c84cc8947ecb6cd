//go:build sandproof_mutant && mutant_nomarker

package mutant

// Active is the mutation this build carries.
const Active = NoMarker
