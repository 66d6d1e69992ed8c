package lake

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"tidemark/lake/store"
)

func openNamesLake(t *testing.T) *Lake {
	t.Helper()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(context.Background(), st, testConfig(&fakeClock{now: t0}))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestClaimName: a name is one stream's at one checkpoint. A restart claims
// it again; another stream (another checkpoint, another id) is refused
// with a message naming the owner's checkpoint; a copy of the checkpoint
// (same id, other place) is refused too, until --take-name moves it.
func TestClaimName(t *testing.T) {
	ctx := context.Background()
	l := openNamesLake(t)
	a := NameClaim{Name: "web", ID: "id-a", Checkpoint: "<lake>/_checkpoints/web"}
	if err := l.ClaimName(ctx, a, false); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if err := l.ClaimName(ctx, a, false); err != nil {
		t.Fatalf("a restart: %v", err)
	}
	b := NameClaim{Name: "web", ID: "id-b", Checkpoint: "/var/lib/tidemark/web"}
	err := l.ClaimName(ctx, b, false)
	if !errors.Is(err, ErrNameTaken) {
		t.Fatalf("a second stream named web: got %v, want ErrNameTaken", err)
	}
	for _, want := range []string{`"web"`, "id-a", "/_checkpoints/web", "/var/lib/tidemark/web", "--take-name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
	if err := l.ClaimName(ctx, NameClaim{Name: "mobile", ID: "id-b", Checkpoint: "/var/lib/tidemark/web"}, false); err != nil {
		t.Errorf("another name: %v", err)
	}

	moved := NameClaim{Name: "web", ID: "id-a", Checkpoint: "/srv/ck/web"}
	err = l.ClaimName(ctx, moved, false)
	if !errors.Is(err, ErrNameTaken) || !strings.Contains(err.Error(), "copy of that checkpoint") {
		t.Fatalf("a copied checkpoint: got %v, want ErrNameTaken calling it a copy", err)
	}
	if err := l.ClaimName(ctx, moved, true); err != nil {
		t.Fatalf("--take-name after a move: %v", err)
	}
	if err := l.ClaimName(ctx, moved, false); err != nil {
		t.Errorf("a restart at the new place: %v", err)
	}
	if err := l.ClaimName(ctx, a, false); !errors.Is(err, ErrNameTaken) {
		t.Errorf("the old place after the move: got %v, want ErrNameTaken", err)
	}
	if err := l.ClaimName(ctx, b, true); err != nil {
		t.Fatalf("--take-name by another stream: %v", err)
	}
	if err := l.ClaimName(ctx, moved, false); !errors.Is(err, ErrNameTaken) {
		t.Errorf("the replaced stream: got %v, want ErrNameTaken", err)
	}
}

// TestClaimNameRace: of streams starting together under one name, exactly
// one gets it.
func TestClaimNameRace(t *testing.T) {
	ctx := context.Background()
	l := openNamesLake(t)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = l.ClaimName(ctx, NameClaim{Name: "stream", ID: string(rune('a' + i)), Checkpoint: string(rune('a' + i))}, false)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrNameTaken):
			t.Errorf("claim: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d streams got the name, want 1", won)
	}
}

// TestClaimNameLegacyShards: a lake from before name claims has only shard
// records; a stream of a name one of them has is refused, the stream of
// that record gets the name.
func TestClaimNameLegacyShards(t *testing.T) {
	ctx := context.Background()
	l := openNamesLake(t)
	if err := l.RegisterShard(ctx, ShardInfo{ID: "id-old", Name: "stream", Sources: []string{"/logs"}}); err != nil {
		t.Fatal(err)
	}
	err := l.ClaimName(ctx, NameClaim{Name: "stream", ID: "id-new", Checkpoint: "/ck2"}, false)
	if !errors.Is(err, ErrNameTaken) || !strings.Contains(err.Error(), "id-old") {
		t.Fatalf("a new stream under a legacy name: got %v, want ErrNameTaken naming id-old", err)
	}
	if err := l.ClaimName(ctx, NameClaim{Name: "stream", ID: "id-old", Checkpoint: "<lake>/_checkpoints/stream"}, false); err != nil {
		t.Fatalf("the legacy stream itself: %v", err)
	}
}
