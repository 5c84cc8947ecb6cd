//go:build race

package relay_test

// raceDetector: the race detector's shadow memory multiplies the heap, so
// RSS bounds are not checked under it.
const raceDetector = true
