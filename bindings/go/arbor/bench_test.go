package arbor

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// benchDB opens a database holding n keys (committed through Go in blocks of 50,000).
func benchDB(b *testing.B, n int) *DB {
	b.Helper()
	db, err := Open(filepath.Join(b.TempDir(), "db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close(context.Background()) })
	for start := 0; start < n; start += 50_000 {
		end := min(start+50_000, n)
		changes := make([]Change, 0, end-start)
		for i := start; i < end; i++ {
			changes = append(changes, Change{Trie: MainTrie, Key: benchKey(i), Value: benchValue(i, 0)})
		}
		if _, err := db.Commit(changes); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

func benchKey(i int) []byte {
	k := make([]byte, 32)
	binary.BigEndian.PutUint64(k, uint64(i)*0x9E3779B97F4A7C15)
	binary.BigEndian.PutUint64(k[8:], uint64(i))
	return k
}

func benchValue(i, round int) []byte {
	v := make([]byte, 64)
	binary.BigEndian.PutUint64(v, uint64(i))
	binary.BigEndian.PutUint64(v[8:], uint64(round))
	return v
}

// BenchmarkGet reads one cached key through Go and reports the native Rust read of the
// same key beside it (rust-ns/op) and the difference (overhead-ns/op; target ≤ 1,000).
func BenchmarkGet(b *testing.B) {
	db := benchDB(b, 100_000)
	key := benchKey(4242)
	if _, err := db.Get(MainTrie, key); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := db.Get(MainTrie, key); err != nil {
			b.Fatal(err)
		}
	}
	goNS := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.StopTimer()
	rustNS, err := nativeGetNS(db.handle, key, uint64(max(b.N, 1000)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rustNS, "rust-ns/op")
	b.ReportMetric(goNS-rustNS, "overhead-ns/op")
}

// BenchmarkCommit10k commits each block of 10,000 changes through Go on one database and
// natively on a twin holding the same state (the two swap roles every round); it reports
// the medians and go/rust (target ≤ 1.10). The native figure is `StateDb::commit` alone;
// the Go one includes encoding the changes, the call and Rust's decoding of them.
func BenchmarkCommit10k(b *testing.B) {
	goDB, rustDB := benchDB(b, 200_000), benchDB(b, 200_000)
	var goTimes, rustTimes, decodeTimes []float64
	b.ResetTimer()
	for round := 0; round < b.N; round++ {
		changes := make([]Change, 0, 10_000)
		for j := 0; j < 10_000; j++ {
			i := (round*10_000 + j*7919) % 300_000
			changes = append(changes, Change{Trie: MainTrie, Key: benchKey(i), Value: benchValue(i, round+1)})
		}
		enc, err := encodeChanges(changes)
		if err != nil {
			b.Fatal(err)
		}
		// Both databases get every block; which one commits through Go alternates, so
		// that a difference between the two databases cancels out, and so does the order.
		viaGo, viaRust := goDB, rustDB
		if round%2 == 1 {
			viaGo, viaRust = rustDB, goDB
		}
		viaGoFirst := round%4 < 2
		commitGo := func() {
			start := time.Now()
			if _, err := viaGo.Commit(changes); err != nil {
				b.Fatal(err)
			}
			goTimes = append(goTimes, float64(time.Since(start).Nanoseconds()))
		}
		commitRust := func() {
			ns, decodeNS, err := nativeCommitNS(viaRust.handle, enc)
			if err != nil {
				b.Fatal(err)
			}
			rustTimes = append(rustTimes, ns)
			decodeTimes = append(decodeTimes, decodeNS)
		}
		// Which goes first alternates too (the other database's background writer may
		// still be persisting the previous block).
		if viaGoFirst {
			commitGo()
			commitRust()
		} else {
			commitRust()
			commitGo()
		}
	}
	b.StopTimer()
	g, r := median(goTimes), median(rustTimes)
	b.ReportMetric(g/1e6, "go-ms/commit")
	b.ReportMetric(r/1e6, "rust-ms/commit")
	b.ReportMetric(g/r, "go/rust")
	b.ReportMetric(median(decodeTimes)/1e6, "decode-ms")
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
