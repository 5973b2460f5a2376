package election

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// coolDown sits out the whole cooldown unless a release hint reserves the scope
// for this node at or after the term it gave up (epoch 7 here): a reservation
// for another node, or one about an earlier term (delivered late), does not end
// it, nor does a stray wake-up.
func TestCoolDown(t *testing.T) {
	const cooldown = 5 * time.Second
	for _, tc := range []struct {
		name   string
		before *reservation // recorded before the cooldown starts
		at     time.Duration
		hint   *reservation // then delivered at at
		want   time.Duration
	}{
		{name: "NoHint", want: cooldown},
		{name: "ReservedForMe", at: time.Second, hint: &reservation{"a", 8}, want: time.Second},
		{name: "FreeScopeReservedForMe", at: time.Second, hint: &reservation{"a", 7}, want: time.Second},
		{name: "ReservedBeforeTheCooldown", before: &reservation{"a", 8}, want: 0},
		{name: "ReservedForAnother", at: time.Second, hint: &reservation{"b", 8}, want: cooldown},
		{name: "LateHintOfAnEarlierTerm", at: time.Second, hint: &reservation{"a", 6}, want: cooldown},
		{name: "StaleBeforeTheCooldown", before: &reservation{"a", 6}, want: cooldown},
		{name: "Released", at: time.Second, hint: &reservation{"", 8}, want: cooldown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := &Elector{cfg: Config{NodeID: "a", ResignCooldown: cooldown}, log: slog.New(slog.DiscardHandler)}
				s := newScope(e, "s", 1)
				if tc.before != nil {
					s.reserve(tc.before.node, tc.before.epoch)
				}
				if tc.hint != nil {
					go func() {
						time.Sleep(tc.at)
						s.reserve(tc.hint.node, tc.hint.epoch)
					}()
				}
				t0 := time.Now()
				s.coolDown(context.Background(), 7)
				if got := time.Since(t0); got != tc.want {
					t.Fatalf("cooldown lasted %v, want %v", got, tc.want)
				}
				synctest.Wait()
			})
		})
	}
	t.Run("Cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := &Elector{cfg: Config{NodeID: "a", ResignCooldown: cooldown}, log: slog.New(slog.DiscardHandler)}
			s := newScope(e, "s", 1)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			t0 := time.Now()
			s.coolDown(ctx, 7)
			if got := time.Since(t0); got != 2*time.Second {
				t.Fatalf("cooldown lasted %v after its context ended at 2s", got)
			}
		})
	})
}
