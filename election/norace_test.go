//go:build !race

package election

const raceEnabled = false
