package arbor

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The big fixture: a closed database of fixtureKeys main-trie keys (committed through Go
// in three big commits) plus a few storage slots, and a checkpoint of its head. Built
// once per test binary, on first use.
const fixtureKeys = 300_000

type bigFixture struct {
	db         string // the database directory (closed)
	checkpoint string // a checkpoint of head
	head       Head
	id         [32]byte
}

var (
	fixtureOnce sync.Once
	fixture     bigFixture
	fixtureErr  error
	fixtureRoot string // removed by TestMain
)

func getFixture(t testing.TB) bigFixture {
	t.Helper()
	fixtureOnce.Do(func() { fixture, fixtureErr = buildFixture(t) })
	if fixtureErr != nil {
		t.Fatalf("building the big fixture: %v", fixtureErr)
	}
	return fixture
}

func buildFixture(t testing.TB) (bigFixture, error) {
	root, err := os.MkdirTemp("", "arbor-go-fixture-")
	if err != nil {
		return bigFixture{}, err
	}
	fixtureRoot = root
	f := bigFixture{db: filepath.Join(root, "db"), checkpoint: filepath.Join(root, "checkpoint")}
	db, err := Open(f.db)
	if err != nil {
		return f, err
	}
	defer db.Close(context.Background())
	model := newStateModel(t)
	const commits = 3
	for i := range commits {
		var storage []Change
		for j := range 10 {
			acct := [32]byte{0xaa, byte(j)}
			storage = append(storage, Change{Trie: StorageTrie(acct), Key: key32(43, uint64(i*10+j)), Value: []byte{byte(i + 1), byte(j)}})
		}
		changes := model.block(t, bigChanges(42, i*fixtureKeys/commits, fixtureKeys/commits), storage)
		if f.head, err = db.Commit(changes); err != nil {
			return f, err
		}
	}
	if f.id, err = db.CreateCheckpoint(context.Background(), f.checkpoint); err != nil {
		return f, err
	}
	return f, db.Close(context.Background())
}

// stateModel keeps the storage tries a test writes, so that every block also sets each
// touched account to an Ethereum account committing to its storage root (checkpoints
// require it).
type stateModel struct {
	calc    *rootCalc
	storage map[[32]byte]map[string][]byte
}

func newStateModel(t testing.TB) *stateModel {
	return &stateModel{calc: newRootCalc(t), storage: map[[32]byte]map[string][]byte{}}
}

// block returns main ‖ storage ‖ the accounts of the touched storage tries.
func (m *stateModel) block(t testing.TB, main, storage []Change) []Change {
	t.Helper()
	touched := map[[32]byte]bool{}
	for _, c := range storage {
		acct, ok := c.Trie.Account()
		if !ok {
			t.Fatal("a storage change in the main trie")
		}
		if m.storage[acct] == nil {
			m.storage[acct] = map[string][]byte{}
		}
		if len(c.Value) == 0 {
			delete(m.storage[acct], string(c.Key))
		} else {
			m.storage[acct][string(c.Key)] = c.Value
		}
		touched[acct] = true
	}
	changes := append(append([]Change{}, main...), storage...)
	for acct := range touched {
		var pairs []Change
		for k, v := range m.storage[acct] {
			pairs = append(pairs, Change{Key: []byte(k), Value: v})
		}
		root := m.calc.root(t, pairs)
		changes = append(changes, Change{Key: bytes.Clone(acct[:]), Value: accountRLP(1, []byte{0x03, 0xe8}, root, emptyCodeHash)})
	}
	return changes
}

// openFixture opens the big fixture's database; it is closed when the test ends.
func openFixture(t testing.TB) (*DB, bigFixture) {
	t.Helper()
	f := getFixture(t)
	checkLeaks(t)
	db, err := Open(f.db)
	if err != nil {
		t.Fatalf("Open(fixture): %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return db, f
}

func TestConcurrentReadsDuringCommits(t *testing.T) {
	db, _ := openTemp(t)
	const (
		keys    = 64
		blocks  = 40
		readers = 16
	)
	acct := [32]byte{0x5a}
	// Block b sets every key to b (8 bytes), in the main trie and in one storage trie.
	block := func(b uint64) []Change {
		changes := make([]Change, 0, 2*keys)
		for k := range keys {
			v := binary.BigEndian.AppendUint64(nil, b)
			changes = append(changes,
				Change{Trie: MainTrie, Key: []byte(fmt.Sprintf("key-%02d", k)), Value: v},
				Change{Trie: StorageTrie(acct), Key: []byte(fmt.Sprintf("slot-%02d", k)), Value: v})
		}
		return changes
	}
	mustCommit(t, db, block(1))

	var started atomic.Uint64 // the newest block whose commit has begun
	started.Store(1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, readers+1)
	wg.Go(func() {
		defer close(done)
		for b := uint64(2); b <= blocks; b++ {
			started.Store(b)
			h, err := db.Commit(block(b))
			if err != nil {
				errs <- fmt.Errorf("commit %d: %w", b, err)
				return
			}
			if h.Number != b {
				errs <- fmt.Errorf("commit %d: head %v", b, h)
				return
			}
		}
	})
	var reads atomic.Int64
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			seen := map[string]uint64{}
			var lastHead uint64
			for n := 0; ; n++ {
				select {
				case <-done:
					if n > 0 {
						return
					}
				default:
				}
				k := rng.IntN(keys)
				trie, key := MainTrie, fmt.Sprintf("key-%02d", k)
				if r%2 == 1 {
					trie, key = StorageTrie(acct), fmt.Sprintf("slot-%02d", k)
				}
				v, err := db.Get(trie, []byte(key))
				if err != nil {
					errs <- fmt.Errorf("reader %d: Get(%s): %w", r, key, err)
					return
				}
				if len(v) != 8 {
					errs <- fmt.Errorf("reader %d: Get(%s) = %x, want 8 bytes", r, key, v)
					return
				}
				b := binary.BigEndian.Uint64(v)
				if b < seen[key] || b < 1 || b > started.Load() {
					errs <- fmt.Errorf("reader %d: %s went from block %d to %d (newest started %d)", r, key, seen[key], b, started.Load())
					return
				}
				seen[key] = b
				reads.Add(1)
				if n%16 == 0 {
					h, err := db.Root()
					if err != nil || h.Number < lastHead || h.Number > started.Load() {
						errs <- fmt.Errorf("reader %d: Root() = %v, %v after head %d", r, h, err, lastHead)
						return
					}
					lastHead = h.Number
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every key ends at the last block.
	for k := range keys {
		v := mustGet(t, db, MainTrie, []byte(fmt.Sprintf("key-%02d", k)))
		if binary.BigEndian.Uint64(v) != blocks {
			t.Fatalf("key-%02d = %x at the end", k, v)
		}
	}
	t.Logf("%d reads during %d commits", reads.Load(), blocks-1)
}

// inFlight runs call in a goroutine and, once it is about to enter Rust (testHookCall)
// and has had wait to get in flight there, runs close. It retries (up to 5 times, with a
// new db from setup, waiting longer) when call lost the race: it failed with ErrClosed and
// Close found nothing in flight. It returns the results.
func inFlight(t *testing.T, wait time.Duration, setup func() *DB, call func(db *DB) error, close func(db *DB) error) (callErr, closeErr error, closeTook time.Duration) {
	t.Helper()
	entered := make(chan struct{}, 1)
	testHookCall = func(string) {
		select {
		case entered <- struct{}{}:
		default:
		}
	}
	defer func() { testHookCall = nil }()
	for attempt := range 5 {
		db := setup()
		result := make(chan error, 1)
		go func() { result <- call(db) }()
		select {
		case <-entered:
		case err := <-result:
			t.Fatalf("the call returned before entering Rust: %v", err)
		}
		time.Sleep(wait * time.Duration(1+attempt))
		t0 := time.Now()
		closeErr = close(db)
		closeTook = time.Since(t0)
		callErr = <-result
		if errors.Is(callErr, ErrClosed) && closeErr == nil {
			t.Logf("attempt %d: the call was not in flight yet when Close ran; again", attempt)
			continue
		}
		return callErr, closeErr, closeTook
	}
	t.Fatal("the call never got in flight before Close")
	return nil, nil, 0
}

func TestCloseWaitsForCommitInFlight(t *testing.T) {
	checkLeaks(t)
	var dir string
	var head Head
	changes := bigChanges(11, 0, 150_000)
	// Rust decodes the change set (about 100 ms) before the commit counts as in flight.
	callErr, closeErr, took := inFlight(t, 150*time.Millisecond,
		func() *DB {
			dir = filepath.Join(t.TempDir(), "db")
			db, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		func(db *DB) (err error) { head, err = db.Commit(changes); return err },
		func(db *DB) error {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			return db.Close(ctx)
		})
	if callErr != nil || closeErr != nil {
		t.Fatalf("commit: %v; Close: %v", callErr, closeErr)
	}
	t.Logf("Close waited %v for the commit", took)
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if h, err := db.Root(); err != nil || h != head || h.Number != 1 {
		t.Fatalf("after reopen: head %v, %v; the commit returned %v", h, err, head)
	}
	if v := mustGet(t, db, MainTrie, changes[len(changes)-1].Key); string(v) != string(changes[len(changes)-1].Value) {
		t.Fatalf("last key of the commit = %x", v)
	}
}

func TestCloseWaitsForCheckpointInFlight(t *testing.T) {
	f := getFixture(t)
	var out string
	var id [32]byte
	callErr, closeErr, took := inFlight(t, 10*time.Millisecond,
		func() *DB { db, _ := openFixture(t); return db },
		func(db *DB) (err error) {
			out = filepath.Join(t.TempDir(), "checkpoint")
			id, err = db.CreateCheckpoint(context.Background(), out)
			return err
		},
		func(db *DB) error {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			return db.Close(ctx)
		})
	if callErr != nil || closeErr != nil {
		t.Fatalf("checkpoint: %v; Close: %v", callErr, closeErr)
	}
	t.Logf("Close waited %v for the checkpoint", took)
	if id != f.id {
		t.Fatalf("checkpoint id %x, the fixture's is %x (same head)", id, f.id)
	}
	// The checkpoint is whole: it restores to the head.
	restored := filepath.Join(t.TempDir(), "restored")
	if err := Restore(context.Background(), restored, f.head.Number, f.head.Root, []string{out}); err != nil {
		t.Fatalf("restore of the checkpoint made during Close: %v", err)
	}
}

func TestCloseExpiredDeadlineWithCallInFlight(t *testing.T) {
	checkLeaks(t)
	var dir string
	var head Head
	changes := bigChanges(12, 0, 150_000)
	callErr, closeErr, took := inFlight(t, 150*time.Millisecond,
		func() *DB {
			dir = filepath.Join(t.TempDir(), "db")
			db, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		func(db *DB) (err error) { head, err = db.Commit(changes); return err },
		func(db *DB) error {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel()
			return db.Close(ctx)
		})
	wantKind(t, "Close with an expired deadline and a call in flight", closeErr, ErrClosed)
	if !errors.Is(closeErr, context.DeadlineExceeded) {
		t.Errorf("Close with an expired deadline: %v, want it to match context.DeadlineExceeded too", closeErr)
	}
	if !strings.Contains(closeErr.Error(), "in flight") {
		t.Errorf("Close error %q does not say why", closeErr)
	}
	if took > 200*time.Millisecond {
		t.Errorf("Close with an expired deadline took %v", took)
	}
	// The commit finished, and the store closed when it ended: it reopens with the block.
	if callErr != nil {
		t.Fatalf("the commit in flight failed: %v", callErr)
	}
	db, err := Open(dir)
	if err != nil {
		t.Fatalf("reopen after the in-flight call ended: %v", err)
	}
	defer db.Close(context.Background())
	if h, err := db.Root(); err != nil || h != head {
		t.Fatalf("after reopen: head %v, %v; the commit returned %v", h, err, head)
	}
}

func TestCloseExpiredDeadlineIdle(t *testing.T) {
	db, dir := openTemp(t)
	h := mustCommit(t, db, []Change{{Key: []byte("k"), Value: []byte("v")}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.Close(ctx); err != nil {
		t.Fatalf("Close of an idle DB with a done context: %v", err)
	}
	wantKind(t, "Close again", db.Close(context.Background()), ErrClosed)
	db2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close(context.Background())
	if got, err := db2.Root(); err != nil || got != h {
		t.Fatalf("head after reopen = %v, %v; want %v", got, err, h)
	}
}

// A small database with storage tries and several blocks, and its checkpoint.
func smallCheckpoint(t *testing.T) (head Head, checkpoint string, db *DB) {
	t.Helper()
	db, _ = openTemp(t)
	model := newStateModel(t)
	for b := range 4 {
		var storage []Change
		for i := range 6 {
			acct := [32]byte{0xbb, byte(i)}
			storage = append(storage, Change{Trie: StorageTrie(acct), Key: key32(22, uint64(b*6+i)), Value: []byte{byte(b + 1)}})
		}
		main := bigChanges(21, b*300, 300)
		if b == 3 {
			main = append(main, Change{Key: key32(21, 5)})
			storage = append(storage, Change{Trie: StorageTrie([32]byte{0xbb, 3}), Key: key32(22, 3)})
		}
		head = mustCommit(t, db, model.block(t, main, storage))
	}
	checkpoint = filepath.Join(t.TempDir(), "checkpoint")
	id, err := db.CreateCheckpoint(context.Background(), checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if id == ([32]byte{}) {
		t.Fatal("zero checkpoint id")
	}
	return head, checkpoint, db
}

func TestCheckpointRestoresThroughCLI(t *testing.T) {
	arborBin(t)
	head, checkpoint, _ := smallCheckpoint(t)
	restored := filepath.Join(t.TempDir(), "restored")
	runArbor(t, "checkpoint", "restore", "--db", restored, "--block", fmt.Sprint(head.Number),
		"--root", hexRoot(head.Root), "--source", checkpoint)
	if got, want := cliVerify(t, restored), head.String(); got != want {
		t.Fatalf("arbor verify of the restored database: %q, want %q", got, want)
	}
}

func TestCheckpointRestoresThroughGo(t *testing.T) {
	head, checkpoint, src := smallCheckpoint(t)
	restored := filepath.Join(t.TempDir(), "restored")
	if err := Restore(context.Background(), restored, head.Number, head.Root, []string{checkpoint}); err != nil {
		t.Fatal(err)
	}
	db, err := Open(restored)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if got, err := db.Root(); err != nil || got != head {
		t.Fatalf("restored head %v, %v; want %v", got, err, head)
	}
	for _, c := range []struct {
		trie Trie
		key  []byte
	}{
		{MainTrie, key32(21, 0)}, {MainTrie, key32(21, 5)}, {MainTrie, key32(21, 1199)},
		{StorageTrie([32]byte{0xbb, 0}), key32(22, 0)}, {StorageTrie([32]byte{0xbb, 3}), key32(22, 3)},
		{StorageTrie([32]byte{0xbb, 5}), key32(22, 23)}, {MainTrie, []byte{0xbb, 5, 31: 0}},
	} {
		want := mustGet(t, src, c.trie, c.key)
		if got := mustGet(t, db, c.trie, c.key); string(got) != string(want) {
			t.Fatalf("restored Get(%v, %x) = %x, source has %x", c.trie, c.key, got, want)
		}
	}
	// The restored database keeps working.
	if h := mustCommit(t, db, []Change{{Key: []byte("new"), Value: []byte("block")}}); h.Number != head.Number+1 {
		t.Fatalf("commit after restore: %v", h)
	}
}

func TestRestoreErrors(t *testing.T) {
	checkLeaks(t)
	head, checkpoint, _ := smallCheckpoint(t)
	wrong := head.Root
	wrong[31] ^= 1
	err := Restore(context.Background(), filepath.Join(t.TempDir(), "r1"), head.Number, wrong, []string{checkpoint})
	if err == nil {
		t.Fatal("restore with a wrong root succeeded")
	}
	wantKind(t, "restore with a wrong root", err, ErrIO)
	t.Logf("wrong root: %v", err)
	err = Restore(context.Background(), filepath.Join(t.TempDir(), "r2"), head.Number, head.Root, []string{filepath.Join(t.TempDir(), "nothing-here")})
	if err == nil {
		t.Fatal("restore from an empty source succeeded")
	}
	t.Logf("empty source: %v", err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Restore(ctx, filepath.Join(t.TempDir(), "r3"), head.Number, head.Root, []string{checkpoint})
	wantKind(t, "restore with a cancelled context", err, ErrCancelled)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("restore with a cancelled context: %v, want context.Canceled too", err)
	}
}

func TestRestoreCancel(t *testing.T) {
	f := getFixture(t)
	checkLeaks(t)
	dir := filepath.Join(t.TempDir(), "restored")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt atomic.Int64
	timer := time.AfterFunc(50*time.Millisecond, func() {
		cancelledAt.Store(time.Now().UnixNano())
		cancel()
	})
	defer timer.Stop()
	t0 := time.Now()
	err := Restore(ctx, dir, f.head.Number, f.head.Root, []string{f.checkpoint})
	returned := time.Now()
	if err == nil {
		t.Fatalf("the restore of %d keys finished in %v, before the cancel: make the fixture bigger", fixtureKeys, returned.Sub(t0))
	}
	wantKind(t, "cancelled restore", err, ErrCancelled)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled restore: %v, want it to match context.Canceled too", err)
	}
	after := returned.Sub(time.Unix(0, cancelledAt.Load()))
	t.Logf("Restore returned %v after the cancel (%v after it started)", after, returned.Sub(t0))
	if after > time.Second {
		t.Fatalf("Restore returned %v after the cancel, want within 1 s", after)
	}
	// It resumes.
	if err := Restore(context.Background(), dir, f.head.Number, f.head.Root, []string{f.checkpoint}); err != nil {
		t.Fatalf("resumed restore: %v", err)
	}
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if h, err := db.Root(); err != nil || h != f.head {
		t.Fatalf("resumed restore: head %v, %v; want %v", h, err, f.head)
	}
}

// Calls racing with Close either complete or fail with ErrClosed; nothing else, and
// nothing crashes.
func TestCloseRacingWithCalls(t *testing.T) {
	db, dir := openTemp(t)
	mustCommit(t, db, bigChanges(5, 0, 1000))
	var wg sync.WaitGroup
	var ok, closed atomic.Int64
	var newest atomic.Uint64 // the newest block a commit returned
	newest.Store(1)
	errs := make(chan error, 8)
	stop := make(chan struct{})
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				var err error
				switch (g + i) % 4 {
				case 0:
					_, err = db.Get(MainTrie, key32(5, uint64(i%1000)))
				case 1:
					_, err = db.Root()
				case 2:
					_, err = db.Prove(key32(5, uint64(i%1000)))
				case 3:
					var h Head
					if h, err = db.Commit(bigChanges(6, i, 5)); err == nil {
						for n := newest.Load(); h.Number > n && !newest.CompareAndSwap(n, h.Number); n = newest.Load() {
						}
					}
				}
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrClosed):
					closed.Add(1)
					select {
					case <-stop:
						return
					default:
					}
				default:
					errs <- err
					return
				}
			}
		})
	}
	time.Sleep(30 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.Close(ctx); err != nil {
		t.Fatalf("Close with calls racing: %v", err)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call racing with Close: %v", err)
	}
	t.Logf("%d calls succeeded, %d saw ErrClosed", ok.Load(), closed.Load())
	// The database closed cleanly: it reopens with every block a commit returned.
	db2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close(context.Background())
	if h, err := db2.Root(); err != nil || h.Number != newest.Load() {
		t.Fatalf("after reopen: head %v, %v; the newest commit returned block %d", h, err, newest.Load())
	}
}

func TestCreateCheckpointCancel(t *testing.T) {
	checkLeaks(t)
	db, _ := openFixture(t)
	// Cancelled before it starts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := db.CreateCheckpoint(ctx, filepath.Join(t.TempDir(), "pre"))
	wantKind(t, "CreateCheckpoint with a cancelled ctx", err, ErrCancelled)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v does not match context.Canceled", err)
	}
	// Cancelled while Rust cuts chunks: it stops, and no manifest names what it wrote.
	stopped := 0
	for _, after := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		dir := filepath.Join(t.TempDir(), "ckpt")
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(after, cancel)
		start := time.Now()
		_, err := db.CreateCheckpoint(ctx, dir)
		took := time.Since(start)
		timer.Stop()
		cancel()
		if err == nil {
			continue
		}
		wantKind(t, "CreateCheckpoint cancelled", err, ErrCancelled)
		if took > after+time.Second {
			t.Fatalf("cancelled after %v, returned after %v", after, took)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "checkpoints", "*", "manifest")); len(m) != 0 {
			t.Fatalf("a cancelled creation wrote a manifest: %v", m)
		}
		stopped++
	}
	if stopped == 0 {
		t.Fatal("no creation was cancelled while running")
	}
}
