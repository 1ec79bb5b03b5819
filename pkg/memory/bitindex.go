package memory

import (
	"container/heap"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// The vector search of a conversation runs in RAM: each scope's current
// facts as 1-bit vectors (the sign of each dimension, bit-packed: 48 bytes
// for bge-small's 384 dimensions, 4.8 MB for 100k facts), scanned by
// Hamming distance with popcount; the candidates are re-ranked by exact
// cosine from the embeddings in SQLite. SQLite stays the source of truth:
// an index is loaded lazily, the first time its scope is searched, from
// the scope's embeddings in memory_facts (by its scope index: a small
// scope loads in milliseconds however large the memory), and kept in step
// by the writes that change memory_vec (after they commit). Nothing of it is
// written anywhere: after a crash it is loaded again. An id in the index
// that SQLite no longer has as a current fact of the scope (a write that
// rolled back) only costs a candidate: the re-rank reads the facts with
// that condition.

// bitIndex is one scope's vectors. ids are kept ascending (facts are
// appended with growing ids); a removed row is marked dead and the rows
// are compacted when a quarter are dead.
type bitIndex struct {
	mu    sync.RWMutex
	words int // uint64 words per vector
	ids   []int64
	bits  []uint64 // len(ids) * words
	dead  []bool
	ndead int
	ready chan struct{} // closed when loaded
	err   error         // the load's error (set before ready is closed)
}

func (b *bitIndex) find(id int64) (int, bool) {
	return slices.BinarySearch(b.ids, id)
}

// put adds or replaces id's vector (q: its bits). A vector of another
// width (a model change racing a write) is not this index's: ignored.
func (b *bitIndex) put(id int64, q []uint64) {
	if len(q) != b.words {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	i, ok := b.find(id)
	if ok {
		copy(b.bits[i*b.words:], q)
		if b.dead[i] {
			b.dead[i] = false
			b.ndead--
		}
		return
	}
	b.ids = slices.Insert(b.ids, i, id)
	b.bits = slices.Insert(b.bits, i*b.words, q...)
	b.dead = slices.Insert(b.dead, i, false)
}

func (b *bitIndex) remove(id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, ok := b.find(id)
	if !ok || b.dead[i] {
		return
	}
	b.dead[i] = true
	b.ndead++
	if b.ndead*4 >= len(b.ids) && b.ndead > 16 {
		b.compact()
	}
}

func (b *bitIndex) compact() {
	n := 0
	for i, id := range b.ids {
		if b.dead[i] {
			continue
		}
		b.ids[n] = id
		copy(b.bits[n*b.words:(n+1)*b.words], b.bits[i*b.words:(i+1)*b.words])
		n++
	}
	b.ids, b.bits, b.dead = b.ids[:n], b.bits[:n*b.words], make([]bool, n)
	b.ndead = 0
}

// len is the number of live vectors.
func (b *bitIndex) len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.ids) - b.ndead
}

// nearest returns the ids of the k vectors closest to q by Hamming
// distance (ties: the newer fact first).
func (b *bitIndex) nearest(q []uint64, k int) []int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if k <= 0 || len(q) != b.words {
		return nil
	}
	h := hamHeap{k: k}
	w := b.words
	if w == 6 { // 384 dimensions (bge-small): unrolled, no bounds checks
		q0, q1, q2, q3, q4, q5 := q[0], q[1], q[2], q[3], q[4], q[5]
		for i := len(b.ids) - 1; i >= 0; i-- { // newest first: equal distances keep the newer
			r := b.bits[i*6 : i*6+6 : i*6+6]
			d := bits.OnesCount64(r[0]^q0) + bits.OnesCount64(r[1]^q1) + bits.OnesCount64(r[2]^q2) +
				bits.OnesCount64(r[3]^q3) + bits.OnesCount64(r[4]^q4) + bits.OnesCount64(r[5]^q5)
			if (len(h.items) < k || d < h.items[0].d) && !b.dead[i] {
				h.offer(d, b.ids[i])
			}
		}
	} else {
		for i := len(b.ids) - 1; i >= 0; i-- {
			row := b.bits[i*w : (i+1)*w]
			d := 0
			for j, x := range row {
				d += bits.OnesCount64(x ^ q[j])
			}
			if (len(h.items) < k || d < h.items[0].d) && !b.dead[i] {
				h.offer(d, b.ids[i])
			}
		}
	}
	return h.sorted()
}

type hamItem struct {
	d  int
	id int64
}

// hamHeap keeps the k nearest seen: a max-heap on distance, its top the
// worst kept.
type hamHeap struct {
	k     int
	items []hamItem
}

// offer keeps (d, id) if it is among the k nearest so far. A later item
// at an equal distance does not displace an earlier one.
func (h *hamHeap) offer(d int, id int64) {
	if len(h.items) < h.k {
		h.items = append(h.items, hamItem{d, id})
		heap.Push(h, nil)
		return
	}
	if d >= h.items[0].d {
		return
	}
	h.items[0] = hamItem{d, id}
	heap.Fix(h, 0)
}

// sorted empties the heap: the ids nearest first.
func (h *hamHeap) sorted() []int64 {
	out := make([]int64, len(h.items))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = h.items[0].id
		heap.Pop(h)
	}
	return out
}

// heap.Interface; Push is called after the item is appended (offer).
func (h *hamHeap) Len() int           { return len(h.items) }
func (h *hamHeap) Less(i, j int) bool { return h.items[i].d > h.items[j].d }
func (h *hamHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *hamHeap) Push(any)           {}
func (h *hamHeap) Pop() any {
	h.items = h.items[:len(h.items)-1]
	return nil
}

// quantize packs the signs of v as sqlite-vec's vec_quantize_binary does:
// dimension i is bit i%8 of byte i/8, set when v[i] > 0 (bytes read as
// little-endian words).
func quantize(v []float32) []uint64 {
	q := make([]uint64, (len(v)+63)/64)
	for i, x := range v {
		if x > 0 {
			q[i/64] |= 1 << (i % 64)
		}
	}
	return q
}

// bitIndexes are the loaded scopes' indexes.
type bitIndexes struct {
	mu     sync.Mutex
	scopes map[string]*bitIndex
	gen    uint64 // bumped by reset: a load from before does not install
}

func newBitIndexes() *bitIndexes { return &bitIndexes{scopes: map[string]*bitIndex{}} }

// reset forgets every index (another model, a rebuilt memory_vec).
func (x *bitIndexes) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.scopes = map[string]*bitIndex{}
	x.gen++
}

// drop forgets scope's index (its facts were purged; a later search loads
// it again).
func (x *bitIndexes) drop(scope string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.scopes, scope)
}

// loaded returns scope's index if it exists (loading or loaded).
func (x *bitIndexes) loaded(scope string) *bitIndex {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.scopes[scope]
}

// put and remove keep a scope's index in step with a committed write; a
// scope not loaded is left alone (its load reads the write).
func (x *bitIndexes) put(scope string, id int64, vec []float32) {
	if b := x.loaded(scope); b != nil {
		<-b.ready
		if b.err == nil {
			b.put(id, quantize(vec))
		}
	}
}

func (x *bitIndexes) remove(scope string, ids ...int64) {
	if b := x.loaded(scope); b != nil {
		<-b.ready
		for _, id := range ids {
			b.remove(id)
		}
	}
}

// bitScope returns scope's index, loading it the first time.
// A failed load is not kept: the next search tries again.
func (s *Store) bitScope(ctx context.Context, scope string, dim int) (*bitIndex, error) {
	if cur := s.emb.Load(); cur == nil || cur.dim != dim {
		// The model changed while this search embedded its query with
		// the old one: its vector belongs to no index now.
		return nil, fmt.Errorf("memory: the embedding model changed during the search")
	}
	x := s.bits
	words := (dim + 63) / 64
	x.mu.Lock()
	b, ok := x.scopes[scope]
	gen := x.gen
	if ok && b.words != words {
		// Built for another model's width (a search that began before
		// a model change): not this search's, and not kept.
		ok = false
	}
	if !ok {
		b = &bitIndex{words: words, ready: make(chan struct{})}
		x.scopes[scope] = b
	}
	x.mu.Unlock()
	if ok {
		select {
		case <-b.ready:
			return b, b.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The entry exists before the read: a write committed after this
	// point finds it and waits for ready, so nothing falls between.
	b.err = s.loadBits(context.WithoutCancel(ctx), scope, b)
	close(b.ready)
	if b.err != nil {
		x.mu.Lock()
		if x.gen == gen && x.scopes[scope] == b {
			delete(x.scopes, scope)
		}
		x.mu.Unlock()
		return nil, b.err
	}
	return b, nil
}

func (s *Store) loadBits(ctx context.Context, scope string, b *bitIndex) error {
	rows, err := s.db.QueryContext(ctx, `SELECT id, embedding FROM memory_facts
		WHERE scope = ? AND superseded_by IS NULL AND embedding IS NOT NULL ORDER BY id`, scope)
	if err != nil {
		return fmt.Errorf("memory: loading the vector index of %s: %w", scope, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var blob sql.RawBytes
		if err := rows.Scan(&id, &blob); err != nil {
			return fmt.Errorf("memory: loading the vector index of %s: %w", scope, err)
		}
		q, ok := quantizeBlob(blob, b.words)
		if !ok {
			continue // not this model's width: Backfill redoes it
		}
		b.ids = append(b.ids, id)
		b.bits = append(b.bits, q...)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory: loading the vector index of %s: %w", scope, err)
	}
	b.dead = make([]bool, len(b.ids))
	return nil
}

// quantizeBlob is quantize of a stored embedding (little-endian float32s)
// without decoding it first.
func quantizeBlob(blob []byte, words int) ([]uint64, bool) {
	dim := len(blob) / 4
	if len(blob)%4 != 0 || (dim+63)/64 != words || dim == 0 {
		return nil, false
	}
	q := make([]uint64, words)
	for i := range dim {
		u := binary.LittleEndian.Uint32(blob[4*i:])
		if u&0x80000000 == 0 && u != 0 && u <= 0x7f800000 { // > 0: sign clear, not 0, not NaN
			q[i/64] |= 1 << (i % 64)
		}
	}
	return q, true
}
