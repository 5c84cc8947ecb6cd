//go:build sandproof_mutant && mutant_paramsmarker

package mutant

// Active is the mutation this build carries.
const Active = ParamsMarker
