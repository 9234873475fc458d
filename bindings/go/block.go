// SPDX-License-Identifier: Apache-2.0

package speckv

import "io"

// Block is an io.ReaderAt / io.WriterAt over one block of a pool, for use
// with io.NewSectionReader and friends. It does not own the block: freeing
// it is the caller's business (Block.Free or Pool.Free).
type Block struct {
	pool   *Pool
	handle Handle
	size   int64
}

// AllocBlock allocates a block of n bytes and returns its reader/writer.
func (p *Pool) AllocBlock(n uint64, dtype DType, hint *Hint) (*Block, error) {
	h, err := p.Alloc(n, dtype, hint)
	if err != nil {
		return nil, err
	}
	return &Block{pool: p, handle: h, size: int64(n)}, nil
}

// Block returns the reader/writer of an existing block (for example one
// whose handle came from another process). It learns the size with
// BlockSize, so a freed or unknown handle fails here with ErrBadHandle.
func (p *Pool) Block(h Handle) (*Block, error) {
	n, err := p.BlockSize(h)
	if err != nil {
		return nil, err
	}
	return &Block{pool: p, handle: h, size: n}, nil
}

// Handle is the block's handle.
func (b *Block) Handle() Handle { return b.handle }

// Size is the block's size in bytes.
func (b *Block) Size() int64 { return b.size }

// ReadAt implements io.ReaderAt: it reads min(len(p), Size()-off) bytes and
// returns io.EOF when that is fewer than len(p).
func (b *Block) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &Error{Code: ErrInvalid, Op: "access", Msg: "negative offset"}
	}
	if off >= b.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := len(p)
	if rest := b.size - off; int64(n) > rest {
		n = int(rest)
	}
	if err := b.pool.Access(b.handle, uint64(off), p[:n]); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt implements io.WriterAt; a write past the end fails with ErrRange
// and writes nothing (blocks do not grow).
func (b *Block) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &Error{Code: ErrInvalid, Op: "write", Msg: "negative offset"}
	}
	if err := b.pool.Write(b.handle, uint64(off), p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Free frees the block.
func (b *Block) Free() error { return b.pool.Free(b.handle) }
