package store_test

import (
	"errors"
	"testing"

	"tidemark/lake/store"
	"tidemark/lake/store/storetest"
)

// TestS3Swapper: on the real server, a conditional put or delete applies
// only to the version read, so a holder whose lease was taken over cannot
// overwrite or delete the new holder's.
func TestS3Swapper(t *testing.T) {
	srv := storetest.StartVersity(t)
	s, err := store.OpenS3(t.Context(), srv.Bucket(t), "lake", s3Config(srv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "lease", []byte("a")); err != nil {
		t.Fatal(err)
	}
	data, tagA, err := s.ReadVersion(ctx, "lease")
	if err != nil || string(data) != "a" || tagA == "" {
		t.Fatalf("ReadVersion: got %q, tag %q, %v; want a, a tag", data, tagA, err)
	}
	tagB, err := s.PutIfMatch(ctx, "lease", []byte("b"), tagA)
	if err != nil || tagB == "" || tagB == tagA {
		t.Fatalf("PutIfMatch on the version read: tag %q, %v; want a new tag", tagB, err)
	}
	// The old version's tag no longer applies: neither a put nor a delete.
	if _, err := s.PutIfMatch(ctx, "lease", []byte("c"), tagA); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("PutIfMatch on a replaced version: %v, want ErrChanged", err)
	}
	if err := s.DeleteIfMatch(ctx, "lease", tagA); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("DeleteIfMatch on a replaced version: %v, want ErrChanged", err)
	}
	if got, tag, err := s.ReadVersion(ctx, "lease"); err != nil || string(got) != "b" || tag != tagB {
		t.Fatalf("after the refused writes: got %q, tag %q, %v; want b, %q", got, tag, err, tagB)
	}
	if err := s.DeleteIfMatch(ctx, "lease", tagB); err != nil {
		t.Fatalf("DeleteIfMatch on the current version: %v", err)
	}
	if _, _, err := s.ReadVersion(ctx, "lease"); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("after the delete: %v, want ErrNotExist", err)
	}
	if _, err := s.PutIfMatch(ctx, "lease", []byte("d"), tagB); err == nil {
		t.Fatal("PutIfMatch on a deleted object: got nil error")
	}
	if err := s.DeleteIfMatch(ctx, "lease", tagB); err != nil {
		t.Fatalf("DeleteIfMatch on a missing object: %v, want nil (as Delete)", err)
	}
}
