//go:build !race

package upgrade_test

const raceEnabled = false
