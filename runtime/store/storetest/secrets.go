package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

var secretTests = []struct {
	name string
	fn   func(*testing.T, *env)
}{
	{"DeploymentSecret_FirstCandidateWins", testDeploymentSecretFirstCandidateWins},
	{"DeploymentSecret_ConcurrentCreatorsAgree", testDeploymentSecretConcurrentCreatorsAgree},
	{"DeploymentSecret_Invalid", testDeploymentSecretInvalid},
}

func init() { tests = append(tests, secretTests...) }

func secretOf(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// testDeploymentSecretFirstCandidateWins: the first candidate stored under a name is
// what every later call gets, through any handle; names are independent.
func testDeploymentSecretFirstCandidateWins(t *testing.T, e *env) {
	got, err := e.s.DeploymentSecretGetOrCreate(e.ctx, "call_id", secretOf(1))
	if err != nil || !bytes.Equal(got, secretOf(1)) {
		t.Fatalf("first: %x, %v; want the candidate", got, err)
	}
	for i := range 2 {
		got, err := e.handle(i).DeploymentSecretGetOrCreate(e.ctx, "call_id", secretOf(2))
		if err != nil || !bytes.Equal(got, secretOf(1)) {
			t.Fatalf("again through handle %d: %x, %v; want the first candidate", i, got, err)
		}
	}
	other, err := e.other.DeploymentSecretGetOrCreate(e.ctx, "other", secretOf(3))
	if err != nil || !bytes.Equal(other, secretOf(3)) {
		t.Fatalf("another name: %x, %v; want its own candidate", other, err)
	}
}

// testDeploymentSecretConcurrentCreatorsAgree: hosts starting together on one store
// all get one secret, whichever candidate it is.
func testDeploymentSecretConcurrentCreatorsAgree(t *testing.T, e *env) {
	const n = 8
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = e.handle(i).DeploymentSecretGetOrCreate(e.ctx, "race", secretOf(byte(10+i)))
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("creator %d: %v", i, errs[i])
		}
		if !bytes.Equal(got[i], got[0]) {
			t.Fatalf("creator %d got %x, creator 0 %x", i, got[i], got[0])
		}
	}
}

func testDeploymentSecretInvalid(t *testing.T, e *env) {
	for _, c := range []struct {
		name   string
		secret []byte
	}{{"", secretOf(1)}, {"short", []byte("too short")}, {"nil", nil}} {
		if _, err := e.s.DeploymentSecretGetOrCreate(e.ctx, c.name, c.secret); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", fmt.Sprintf("%q/%d bytes", c.name, len(c.secret)), err)
		}
	}
}
